// Logging into the host's log, tagged with the actor's name and key.
// (console.log and console.error also reach the host's log, as the
// guest's stdout and stderr.)

import { log as witLog } from 'burrow:actor/log@0.1.0';

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error']);

/** Logs `message` at `level`: trace, debug, info, warn or error. */
export function log(level, message) {
  if (!LEVELS.has(level)) throw new TypeError(`unknown log level ${JSON.stringify(level)}`);
  witLog(level, String(message));
}

export const trace = (message) => log('trace', message);
export const debug = (message) => log('debug', message);
export const info = (message) => log('info', message);
export const warn = (message) => log('warn', message);
export const error = (message) => log('error', message);
