import { handler } from './host.mjs';

export const execute = handler('db', 'execute');
export const executeBatch = handler('db', 'executeBatch');
