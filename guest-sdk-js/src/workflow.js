// Durable workflows: replay-safe steps, durable sleeps, recorded time,
// loops that prune their history, joins and races, queue waits, rollback
// handlers, and versions for evolving code.
//
// A workflow actor declares `workflow: run` in `actor()`, where `run(ctx,
// input)` is an async function. The host runs it when the instance is
// created and again after every wait, wake and restart, each time from the
// start: a step that finished returns its recorded output without running
// again, so only the orchestration code re-runs, and it must be
// deterministic (take time from `ctx.now()`, not Date.now(): the host traps
// clock and random calls outside steps). Side effects (db, state, queue,
// schedule, actors, events, fetch) work only inside a step; outside, they
// throw NotInStepError.
//
// Every method of `ctx` returns a promise: await each one before the next,
// since a run's positions are taken in the order its calls are made (use
// `ctx.join` to run branches side by side).

import * as wit from 'burrow:actor/workflow@0.1.0';
import { Failure, NotInStepError, StepFailure, asFailure, messageOf, payloadOf } from './errors.js';
import { parse, stringify } from './json.js';
import { eventFrom } from './queue.js';
import { check } from './types.js';

const INTERRUPTS = new Set(['suspend', 'diverged', 'invalid']);

// The host refuses WASI clocks and random numbers to orchestration code,
// but SpiderMonkey's Math.random draws from a seed taken once at startup,
// so the host never sees it: the SDK refuses it itself while a run is in
// its orchestration code (outside step bodies).
let orchestrating = false;
const engineRandom = Math.random;
Math.random = function random() {
  if (orchestrating) {
    throw new NotInStepError(
      'Math.random() was called by workflow orchestration code, which is replayed and must be ' +
        'deterministic; call it inside a step, whose output is recorded',
    );
  }
  return engineRandom();
};

/**
 * Why the orchestration code cannot go on: `kind` is `suspend` (the run
 * waits: a sleep, a retry's backoff, a queue wait), `diverged` (the code no
 * longer matches the recorded history) or `invalid` (a workflow call made
 * where it is not allowed). Let it propagate out of `run`: the SDK
 * re-raises it from every later call of the run even if caught, and the
 * host knows what to do next.
 */
export class WorkflowInterrupt {
  constructor(kind, message = '') {
    this.kind = kind;
    this.message = message;
  }

  toString() {
    return this.message ? `workflow ${this.kind}: ${this.message}` : `workflow ${this.kind}`;
  }
}

const OPTION_KEYS = new Set(['retries', 'backoffBase', 'backoffCap', 'timeout']);

function millis(value, what) {
  if (typeof value === 'bigint' ? value < 0n : !Number.isSafeInteger(value) || value < 0) {
    throw new Failure('invalid-arguments', `${what} must be a non-negative integer of milliseconds, not ${value}`);
  }
  return BigInt(value);
}

/** Step options (`{retries = 3, backoffBase = 1000, backoffCap = 60000,
 * timeout}`, in milliseconds) as the WIT record. */
function stepOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw new Failure('invalid-arguments', 'step options are an object such as {retries: 3, timeout: 5000}');
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new Failure('invalid-arguments', `unknown step option ${JSON.stringify(key)}; the options are ${[...OPTION_KEYS].join(', ')}`);
    }
  }
  const retries = options.retries ?? 3;
  if (!Number.isInteger(retries) || retries < 0 || retries >= 2 ** 32) {
    throw new Failure('invalid-arguments', `retries must be a non-negative integer, not ${retries}`);
  }
  return {
    maxRetries: retries,
    backoffBaseMs: millis(options.backoffBase ?? 1000, 'backoffBase'),
    backoffCapMs: millis(options.backoffCap ?? 60000, 'backoffCap'),
    timeoutMs: options.timeout === undefined || options.timeout === null ? undefined : millis(options.timeout, 'timeout'),
  };
}

function stepFailure(f) {
  return new StepFailure(f.kind, f.code, f.message, f.attempts);
}

/** `(name, body)` or `(name, options, body)`, and an optional trailing undo. */
function stepArgs(name, rest, what) {
  let options = {};
  let body = rest[0];
  let more = rest.slice(1);
  if (typeof body !== 'function') {
    options = rest[0] ?? {};
    body = rest[1];
    more = rest.slice(2);
  }
  if (typeof body !== 'function') {
    throw new Failure('invalid-arguments', `${what}(${JSON.stringify(name)}, ...): the body must be a function`);
  }
  return { options, body, more };
}

function loopStep(name, result) {
  if (result !== null && typeof result === 'object') {
    if (Object.prototype.hasOwnProperty.call(result, 'break')) return { done: true, value: result.break };
    if (Object.prototype.hasOwnProperty.call(result, 'continue')) return { done: false, value: result.continue };
  }
  throw new Failure('invalid-arguments', `the body of loop ${JSON.stringify(name)} must return {continue: state} or {break: output}`);
}

/** The orchestration context of one run. */
export class Ctx {
  #undo = [];
  #interrupt = null;
  #attempt = 0;

  /** Inside a step's body: which attempt this is (1 for the first); 0
   * outside a step. */
  get attempt() {
    return this.#attempt;
  }

  /** A workflow import, its interrupt made sticky; with `check`, refused at
   * once after an interrupt. */
  #wit(call, checkFirst = true) {
    if (checkFirst && this.#interrupt) throw this.#interrupt;
    try {
      return call();
    } catch (e) {
      const payload = payloadOf(e);
      if (payload && INTERRUPTS.has(payload.tag)) {
        this.#interrupt = new WorkflowInterrupt(payload.tag, payload.val ?? '');
        throw this.#interrupt;
      }
      throw e;
    }
  }

  /** Inside a step's body: the step's idempotency key, the same in every
   * attempt, in every run and after every restart, different for every
   * other step (and another instance, or one created anew under the same
   * key). Send it with the step's requests (`Idempotency-Key`) so that a
   * server that honours it applies a retried attempt once. `null` outside
   * a step. */
  get stepKey() {
    return wit.stepKey() ?? null;
  }

  /** The interrupt that stopped this run, if any (for the runner). */
  interrupted() {
    return this.#interrupt;
  }

  async #runStep(name, options, body) {
    const opts = stepOptions(options);
    const start = this.#wit(() => wit.beginStep(String(name), opts));
    if (start.tag === 'done') {
      try {
        return { ok: true, value: parse(start.val) };
      } catch (e) {
        throw new Failure('json', `the recorded output of step \`${name}\` does not decode: ${messageOf(e)}`);
      }
    }
    if (start.tag === 'failed') return { ok: false, failure: stepFailure(start.val) };
    this.#attempt = start.val;
    let outcome;
    let json;
    const outer = orchestrating;
    orchestrating = false;
    try {
      const value = await body();
      try {
        json = stringify(value);
        outcome = { tag: 'ok', val: json };
      } catch (e) {
        outcome = { tag: 'critical', val: { code: 'json', message: `the output could not be encoded as JSON: ${messageOf(e)}` } };
      }
    } catch (e) {
      if (e instanceof WorkflowInterrupt) {
        outcome = { tag: 'critical', val: { code: 'invalid', message: e.toString() } };
      } else {
        const f = asFailure(e);
        const val = { code: f.code, message: f.message };
        outcome = { tag: f.rollback ? 'rollback' : f.critical ? 'critical' : 'error', val };
      }
    } finally {
      this.#attempt = 0;
      orchestrating = outer;
    }
    const ended = this.#wit(() => wit.endStep(outcome), false);
    if (this.#interrupt) throw this.#interrupt;
    if (ended !== undefined && ended !== null) return { ok: false, failure: stepFailure(ended) };
    if (outcome.tag !== 'ok') throw this.#setInterrupt('invalid', 'the host committed a step that failed');
    return { ok: true, value: parse(json) };
  }

  #setInterrupt(kind, message) {
    this.#interrupt = new WorkflowInterrupt(kind, message);
    return this.#interrupt;
  }

  /**
   * Runs `body` as the step `name` and returns its output (the output's
   * JSON, decoded: the same value a replay returns). Called as
   * `step(name, body)` or `step(name, options, body)` with options
   * `{retries, backoffBase, backoffCap, timeout}` (milliseconds; defaults 3
   * retries, 1 s doubling to 1 min, the actor's call timeout). `body` may
   * be async. Throwing a Failure retries it; one made with `{critical:
   * true}` fails the step at once, one with `{rollback: true}` fails it
   * and rolls the workflow back. A step that fails for good throws its
   * StepFailure.
   */
  async step(name, ...rest) {
    const { options, body } = stepArgs(name, rest, 'step');
    const result = await this.#runStep(name, options, body);
    if (!result.ok) throw result.failure;
    return result.value;
  }

  /** Like `step`, but a failure for good comes back as data:
   * `{ok: true, value}` or `{ok: false, failure}` (a StepFailure). What a
   * failed attempt wrote is rolled back; what earlier steps wrote stays. */
  async tryStep(name, ...rest) {
    const { options, body } = stepArgs(name, rest, 'tryStep');
    return this.#runStep(name, options, body);
  }

  /** Runs `block(ctx)`; a StepFailure thrown inside it (a step, join or
   * race that failed for good) comes back as `{ok: false, failure}`, except
   * a rollback unless `catchRollback` is set. What the block's steps wrote
   * before the failure stays. */
  async tryBlock(block, { catchRollback = false } = {}) {
    try {
      return { ok: true, value: await block(this) };
    } catch (e) {
      if (e instanceof StepFailure && !this.#interrupt && (catchRollback || e.kind !== 'rollback')) {
        return { ok: false, failure: e };
      }
      throw e;
    }
  }

  /** Like `step` (`(name, body, undo)` or `(name, options, body, undo)`),
   * and registers `undo(output)`: if the workflow later fails for good,
   * the handlers of the steps completed since the last
   * `rollbackCheckpoint` run in reverse order, each as the step
   * `rollback <name>`. */
  async stepWithRollback(name, ...rest) {
    const { options, body, more } = stepArgs(name, rest, 'stepWithRollback');
    const undo = more[0];
    if (typeof undo !== 'function') {
      throw new Failure('invalid-arguments', `stepWithRollback(${JSON.stringify(name)}, ...): the last argument must be the undo function`);
    }
    const value = await this.step(name, options, body);
    this.#undo.push({ name: String(name), undo: () => undo(value) });
    return value;
  }

  /** Marks where a rollback stops: the handlers of steps before it do not
   * run. */
  rollbackCheckpoint(name) {
    void name;
    this.#undo = [];
  }

  /** Runs the pending rollback handlers in reverse order (for the runner). */
  async rollBack() {
    while (this.#undo.length > 0) {
      const { name, undo } = this.#undo.pop();
      const step = `rollback ${name}`;
      const result = await this.#runStep(step, {}, undo);
      if (!result.ok) {
        const f = result.failure;
        throw new StepFailure('rollback', f.code, `${step}: ${f.message}`, f.attempts);
      }
    }
  }

  /**
   * Runs a loop named `name`: `body(ctx, state)` returns `{continue:
   * next}` to run another iteration with `next`, or `{break: output}` to
   * end it. Each iteration's positions are its own and its history is
   * pruned when it ends, so a long loop keeps a short history; a replay
   * starts at the current iteration with the state carried into it (the
   * state as JSON, decoded).
   */
  async repeat(name, state, body) {
    const start = this.#wit(() => wit.loopEnter(String(name), stringify(state)));
    if (start.tag === 'done') return parse(start.val);
    let current = parse(start.val.state);
    for (;;) {
      let result;
      try {
        result = loopStep(name, await body(this, current));
      } catch (e) {
        if (!(e instanceof WorkflowInterrupt) && !this.#interrupt) this.#wit(() => wit.loopLeave(), false);
        throw e;
      }
      const json = stringify(result.value);
      if (result.done) {
        this.#wit(() => wit.loopBreak(json));
        return parse(json);
      }
      this.#wit(() => wit.loopContinue(json));
      current = parse(json);
    }
  }

  /** Runs one branch; a suspend stays inside it. */
  async #branch(branch) {
    try {
      return { ok: true, value: await branch(this) };
    } catch (error) {
      if (error instanceof WorkflowInterrupt && error.kind === 'suspend') {
        this.#interrupt = null;
        return { ok: false, suspended: true };
      }
      return { ok: false, error };
    }
  }

  /** Runs every branch (`async (ctx) => ...`) and returns their outputs in
   * order. A branch that waits (a sleep, a queue wait, a retry) does not
   * hold the others back: the run waits for the earliest, and later runs
   * replay the branches that finished. */
  async join(name, branches) {
    this.#wit(() => wit.joinEnter(String(name), false));
    const outcomes = [];
    for (let i = 0; i < branches.length; i++) {
      this.#wit(() => wit.branch(i), false);
      outcomes.push(await this.#branch(branches[i]));
    }
    this.#wit(() => wit.joinExit(undefined), false);
    let waiting = false;
    const values = [];
    for (const outcome of outcomes) {
      if (outcome.ok) values.push(outcome.value);
      else if (outcome.suspended) waiting = true;
      else throw outcome.error;
    }
    if (waiting) throw this.#setInterrupt('suspend');
    return values;
  }

  /** Runs the branches until one finishes (completes or fails for good);
   * returns `{index, value}` of that one. The others are cancelled: their
   * waits are dropped and they do not run again. The winner is recorded,
   * so a replay takes the same path. */
  async race(name, branches) {
    const recorded = this.#wit(() => wit.joinEnter(String(name), true));
    const order = recorded === undefined || recorded === null ? branches.map((_, i) => i) : [recorded];
    for (const index of order) {
      const branch = branches[index];
      if (typeof branch !== 'function') {
        this.#wit(() => wit.joinExit(undefined), false);
        throw this.#setInterrupt('diverged', `race \`${name}\` recorded branch ${index} as its winner, and the code has no such branch`);
      }
      this.#wit(() => wit.branch(index), false);
      const outcome = await this.#branch(branch);
      if (outcome.suspended) continue;
      if (!outcome.ok && outcome.error instanceof WorkflowInterrupt) {
        this.#wit(() => wit.joinExit(undefined), false);
        throw outcome.error;
      }
      this.#wit(() => wit.joinExit(index), false);
      if (!outcome.ok) throw outcome.error;
      return { index, value: outcome.value };
    }
    this.#wit(() => wit.joinExit(undefined), false);
    throw this.#setInterrupt('suspend');
  }

  /** Takes the next event of the instance's queue whose type is one of
   * `types` (any when empty); it leaves the queue in the transaction that
   * records it here. Without one the run waits; after `timeoutMs` (none by
   * default: wait for ever) it gets null. */
  async nextEvent(name, types = [], timeoutMs = null) {
    const events = await this.nextBatch(name, types, 1, timeoutMs);
    return events[0] ?? null;
  }

  /** Like `nextEvent`, taking up to `count` events at once (those pending
   * when the run gets here; at least one unless the timeout passed). */
  async nextBatch(name, types = [], count = 1, timeoutMs = null) {
    if (!Array.isArray(types)) throw new Failure('invalid-arguments', 'the event types must be an array of strings');
    if (!Number.isInteger(count) || count < 1 || count >= 2 ** 32) {
      throw new Failure('invalid-arguments', `the count must be a positive integer, not ${count}`);
    }
    const timeout = timeoutMs === null || timeoutMs === undefined ? undefined : millis(timeoutMs, 'the timeout');
    const events = this.#wit(() => wit.queueNext(String(name), types.map(String), count, timeout));
    return events.map(eventFrom);
  }

  /** Sleeps durably for `ms` milliseconds: the wake-up time is recorded the
   * first time the run gets here; the instance may sleep or restart
   * meanwhile. */
  async sleep(name, ms) {
    const duration = millis(ms, 'the duration');
    this.#wit(() => wit.sleep(String(name), duration));
  }

  /** Sleeps durably until `atMs`, milliseconds since the Unix epoch. */
  async sleepUntil(name, atMs) {
    if (typeof atMs !== 'bigint' && !Number.isSafeInteger(atMs)) {
      throw new Failure('invalid-arguments', `the time must be an integer of milliseconds, not ${atMs}`);
    }
    this.#wit(() => wit.sleepUntil(String(name), BigInt(atMs)));
  }

  /** The time (ms since the Unix epoch), recorded the first time the run
   * gets here and the same on every replay. */
  async now() {
    return Number(this.#wit(() => wit.now()));
  }

  /** For evolving code: the version recorded at this position (`latest`
   * for a run that gets here first; 0 for a run from before it existed). */
  async version(name, latest) {
    if (!Number.isInteger(latest) || latest < 0 || latest >= 2 ** 32) {
      throw new Failure('invalid-arguments', `the version must be a non-negative integer, not ${latest}`);
    }
    return this.#wit(() => wit.version(String(name), latest));
  }

  /** For evolving code: stands where a step `name` was that the code no
   * longer has, so that runs which recorded it do not diverge. */
  async removed(name) {
    this.#wit(() => wit.removed(String(name)));
  }
}

function failed(code, message) {
  return { tag: 'failed', val: { code, message } };
}

/** The `run` export: decodes the input, runs the workflow, rolls back on a
 * failure, and tells the host how the run ended. */
export async function runWorkflow(run, inputType, input) {
  try {
    return await runOnce(run, inputType, input);
  } finally {
    orchestrating = false;
  }
}

async function runOnce(run, inputType, input) {
  let value;
  try {
    value = parse(input);
    if (inputType !== undefined) value = check(inputType, value);
  } catch (e) {
    return failed('invalid-input', `the workflow's input does not decode: ${messageOf(e)}`);
  }
  const ctx = new Ctx();
  let output;
  let error;
  orchestrating = true;
  try {
    output = await run(ctx, value);
  } catch (e) {
    error = e;
  }
  if (error === undefined && ctx.interrupted() === null) {
    try {
      return { tag: 'completed', val: stringify(output) };
    } catch (e) {
      return failed('json', `the output could not be encoded as JSON: ${messageOf(e)}`);
    }
  }
  if (ctx.interrupted() === null) {
    try {
      await ctx.rollBack();
    } catch (e) {
      error = e;
    }
  }
  const interrupt = ctx.interrupted() ?? (error instanceof WorkflowInterrupt ? error : null);
  if (interrupt !== null) {
    return interrupt.kind === 'invalid' ? failed('invalid', interrupt.message) : { tag: 'interrupted' };
  }
  if (error instanceof StepFailure) {
    return failed(error.code, `step failed for good: ${error.kind} after ${error.attempts} attempt(s): ${error.code}: ${error.message}`);
  }
  const f = asFailure(error);
  return failed(f.code, f.message);
}
