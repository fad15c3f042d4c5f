// The actor's state: one JSON value per instance, committed with the call
// that wrote it (the same bytes the Rust SDK keeps, so `burrow inspect`
// shows it as JSON).

import { get as witGet, set as witSet } from 'burrow:actor/state@0.1.0';
import { CapabilityError, Failure, guard, messageOf } from './errors.js';
import { parse, stringify } from './json.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function stateError({ tag, val }) {
  const message = tag === 'too-large' ? `the state is over the limit of ${val} bytes` : String(val);
  return new CapabilityError('state', tag, message);
}

/** The state, or `fallback` (undefined unless given) if it was never set. */
export function get(fallback) {
  const bytes = guard(() => witGet(), stateError);
  if (bytes === undefined || bytes === null) return fallback;
  try {
    return parse(decoder.decode(bytes));
  } catch (e) {
    throw new Failure('state', `the stored state does not decode: ${messageOf(e)}`);
  }
}

/** Replaces the state with `value` (anything JSON can hold). */
export function set(value) {
  const bytes = encoder.encode(stringify(value));
  guard(() => witSet(bytes), stateError);
}

/**
 * Reads the state (or `initial` if it was never set), passes it to `f`, and
 * writes back what `f` returns, or, if `f` returns undefined, the value it
 * changed in place. Returns the state written.
 *
 *     state.update((s) => { s[name] = (s[name] ?? 0) + 1; }, {});
 *     state.update((n) => n + 1, 0);
 */
export function update(f, initial = null) {
  const current = get(initial);
  const returned = f(current);
  const next = returned === undefined ? current : returned;
  set(next);
  return next;
}
