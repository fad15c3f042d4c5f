import { handler } from './host.mjs';

export const log = handler('log', 'log');
