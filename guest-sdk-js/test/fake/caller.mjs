import { handler } from './host.mjs';

export const who = handler('caller', 'who');
