import { handler } from './host.mjs';

export const get = handler('state', 'get');
export const set = handler('state', 'set');
