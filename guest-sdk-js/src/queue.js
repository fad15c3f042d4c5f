// The instance's durable queue: append events, and process them one
// transaction each (see `queue` in `actor()`).

import { append as witAppend } from 'burrow:actor/queue@0.1.0';
import { CapabilityError, Failure, guard, messageOf } from './errors.js';
import { parse, stringify } from './json.js';

/** The modes of a queue policy. */
export const MODES = ['fifo', 'lifo', 'random', 'custom'];

function queueError({ tag, val }) {
  let message = String(val);
  if (tag === 'too-large') message = `the payload is over the limit of ${val} bytes`;
  if (tag === 'full') message = `the queue is full (${val} pending events)`;
  return new CapabilityError('queue', tag, message);
}

/** Append options as the WIT record: `{priority = 0, group = null}`. */
export function witOptions(options = {}, what = 'append') {
  const priority = options.priority ?? 0;
  if (!Number.isInteger(priority) || priority < -(2 ** 31) || priority >= 2 ** 31) {
    throw new Failure('invalid-arguments', `${what}: the priority must be an integer of 32 bits, not ${priority}`);
  }
  const group = options.group ?? undefined;
  if (group !== undefined && typeof group !== 'string') {
    throw new Failure('invalid-arguments', `${what}: the group must be a string or null`);
  }
  return { priority, group };
}

/**
 * Appends an event to this instance's queue; returns its id. `payload` is
 * anything JSON can hold; `options` are `{priority, group}` (lower
 * priorities first; events of one group share the policy's concurrency).
 * The event exists once the current call commits.
 */
export function append(type, payload = null, options = {}) {
  const json = stringify(payload);
  const opts = witOptions(options);
  return Number(guard(() => witAppend(String(type), json, opts), queueError));
}

/** A WIT event as the plain object `process` and `select` get. */
export function eventFrom(e) {
  const id = Number(e.id);
  let payload;
  let error;
  try {
    payload = parse(e.payload);
  } catch (err) {
    error = err;
  }
  const event = {
    id,
    type: e.eventType,
    priority: e.priority,
    group: e.group ?? null,
    createdAt: Number(e.createdAt),
    attempt: e.attempt,
    payloadJson: e.payload,
  };
  if (error === undefined) {
    event.payload = payload;
  } else {
    Object.defineProperty(event, 'payload', {
      enumerable: true,
      get() {
        throw new Failure('invalid-payload', `the payload of event ${id} does not decode: ${messageOf(error)}`);
      },
    });
  }
  return event;
}

/** A policy as the WIT record: 'fifo', or `{mode, concurrency}` where
 * concurrency is the most `process` calls in flight per group (1 by
 * default; null for no limit). */
export function witPolicy(policy) {
  if (typeof policy === 'string') policy = { mode: policy };
  if (policy === null || typeof policy !== 'object' || !MODES.includes(policy.mode)) {
    throw new Failure('invalid-policy', `a queue policy is one of ${MODES.join(', ')}, or {mode, concurrency}`);
  }
  const concurrency = policy.concurrency === undefined ? 1 : policy.concurrency;
  if (concurrency !== null && (!Number.isInteger(concurrency) || concurrency < 1 || concurrency >= 2 ** 32)) {
    throw new Failure('invalid-policy', `the concurrency must be a positive integer or null, not ${concurrency}`);
  }
  return { mode: policy.mode, concurrency: concurrency ?? undefined };
}
