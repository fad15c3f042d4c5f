import { handler } from './host.mjs';

export const append = handler('queue', 'append');
