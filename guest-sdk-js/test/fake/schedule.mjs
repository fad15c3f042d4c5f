import { handler } from './host.mjs';

export const after = handler('schedule', 'after');
export const at = handler('schedule', 'at');
export const every = handler('schedule', 'every');
export const pending = handler('schedule', 'pending');
export const cancel = handler('schedule', 'cancel');
