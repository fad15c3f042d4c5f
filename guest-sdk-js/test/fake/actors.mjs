import { handler } from './host.mjs';

export const call = handler('actors', 'call');
export const send = handler('actors', 'send');
