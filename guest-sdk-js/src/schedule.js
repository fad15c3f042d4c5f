// Actions to run later. A schedule is written in the current call's
// transaction (it exists once that call commits, and not at all if it rolls
// back) and runs its action once, in a transaction of its own, at or after
// its time, across sleep, restarts and crashes.

import * as wit from 'burrow:actor/schedule@0.1.0';
import { CapabilityError, Failure, guard } from './errors.js';
import { parse, stringify } from './json.js';

function scheduleError({ tag, val }) {
  const message = tag === 'full' ? `the instance has ${val} pending schedules, the most it may have` : String(val);
  return new CapabilityError('schedule', tag, message);
}

/** Action arguments as JSON text: an array. */
export function encodeArgs(args) {
  if (!Array.isArray(args)) {
    throw new Failure('invalid-arguments', 'action arguments must be an array, such as [1, "a"] or []');
  }
  return stringify(args);
}

function u64(value, what) {
  if (typeof value === 'bigint' ? value < 0n : !Number.isSafeInteger(value) || value < 0) {
    throw new Failure('invalid-arguments', `${what} must be a non-negative integer, not ${value}`);
  }
  return BigInt(value);
}

function s64(value, what) {
  if (typeof value !== 'bigint' && !Number.isSafeInteger(value)) {
    throw new Failure('invalid-arguments', `${what} must be an integer, not ${value}`);
  }
  return BigInt(value);
}

/** Runs `action` with `args` `delayMs` milliseconds from now; returns the
 * schedule's id. */
export function after(delayMs, action, args = []) {
  const delay = u64(delayMs, 'the delay');
  const json = encodeArgs(args);
  return Number(guard(() => wit.after(delay, String(action), json), scheduleError));
}

/** Runs `action` with `args` at `atMs` (milliseconds since the Unix epoch;
 * a time in the past runs as soon as possible); returns the schedule's id. */
export function at(atMs, action, args = []) {
  const when = s64(atMs, 'the time');
  const json = encodeArgs(args);
  return Number(guard(() => wit.at(when, String(action), json), scheduleError));
}

/** Runs `action` with `args` every `intervalMs` (at least 100), the first
 * time one interval from now, until cancelled; returns the schedule's id. */
export function every(intervalMs, action, args = []) {
  const interval = u64(intervalMs, 'the interval');
  const json = encodeArgs(args);
  return Number(guard(() => wit.every(interval, String(action), json), scheduleError));
}

/** The pending schedules, soonest first: `{id, action, args, at, everyMs}`
 * (`args` decoded, `everyMs` null for a one-off). */
export function pending() {
  return guard(() => wit.pending(), scheduleError).map((s) => ({
    id: Number(s.id),
    action: s.action,
    args: parse(s.args),
    at: Number(s.at),
    everyMs: s.everyMs === undefined ? null : Number(s.everyMs),
  }));
}

/** Cancels schedule `id`; returns whether it was pending. */
export function cancel(id) {
  const value = u64(id, 'the schedule id');
  return guard(() => wit.cancel(value), scheduleError);
}
