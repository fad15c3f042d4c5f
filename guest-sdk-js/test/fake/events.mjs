import { handler } from './host.mjs';

export const broadcast = handler('events', 'broadcast');
