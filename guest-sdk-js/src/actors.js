// Calls to other actor instances. A call wakes (or creates) the other
// instance and runs its action in that instance's own transaction, which
// commits before the call returns: it is not undone if the caller fails
// afterwards. Inside a workflow, calls and sends are allowed only in steps.

import { call as witCall, send as witSend } from 'burrow:actor/actors@0.1.0';
import { CallError, Failure, guard, messageOf } from './errors.js';
import { parse, stringify } from './json.js';
import { witOptions } from './queue.js';
import { encodeArgs } from './schedule.js';

function callError({ tag, val }) {
  switch (tag) {
    case 'failed':
      return new CallError('failed', val.code, val.message);
    case 'unavailable':
      return new CallError('unavailable', 'unavailable', `${val.code}: ${val.message}`);
    default:
      return new CallError(tag, tag, String(val));
  }
}

/**
 * Calls `action` on the instance (`actor`, `key`) with `args` (an array)
 * and returns its decoded result. The callee's own error keeps its code
 * (a CallError of kind `failed`); the other failures have the codes
 * `cycle`, `invalid`, `unavailable` and `not-allowed` (and outside a
 * workflow step, NotInStepError).
 */
export function call(actor, key, action, args = []) {
  const json = encodeArgs(args);
  const result = guard(() => witCall(String(actor), String(key), String(action), json), callError);
  try {
    return parse(result);
  } catch (e) {
    throw new Failure('json', `the result of ${actor}/${key} ${action} does not decode: ${messageOf(e)}`);
  }
}

/** Appends an event to the queue of the instance (`actor`, `key`), with
 * `{priority, group}`; returns the event's id. */
export function send(actor, key, type, payload = null, options = {}) {
  const json = stringify(payload);
  const opts = witOptions(options, 'send');
  return Number(guard(() => witSend(String(actor), String(key), String(type), json, opts), callError));
}
