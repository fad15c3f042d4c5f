// The errors an actor throws and the SDK raises.
//
// `Failure` is the application error: a code the caller can match and a
// message for people. Thrown from an action, it rolls the action back and
// the caller gets both. Every error the SDK raises for a host refusal is a
// subclass, so that guest code can match it with `instanceof`.

/** An application error: a machine-readable `code` and a `message`. */
export class Failure extends Error {
  /**
   * @param {string} code a short identifier the caller can match, such as `"not-found"`
   * @param {string} message for people
   * @param {{critical?: boolean, rollback?: boolean}} [options] in a workflow
   *   step: `critical` fails the step for good without retries; `rollback`
   *   fails it for good and rolls the workflow back to its last checkpoint
   */
  constructor(code, message, options = {}) {
    super(String(message));
    this.code = String(code);
    this.critical = Boolean(options.critical);
    this.rollback = Boolean(options.rollback);
  }
}

/** Raised by every side effect that a workflow's orchestration code calls
 * outside a step (db, state, queue, schedule, actors, events); the message
 * is the host's and names the call. Code `not-in-step`. */
export class NotInStepError extends Failure {
  constructor(message) {
    super('not-in-step', message);
    this.kind = 'not-in-step';
  }
}

/** Why a statement failed (code `db`); `kind` is the host's variant. */
export class DbError extends Failure {
  constructor(kind, message) {
    super('db', message);
    this.kind = kind;
  }
}
/** The SQL text could not be parsed or refers to something unknown. */
export class InvalidSqlError extends DbError {}
/** A constraint (unique, not null, check, foreign key) failed. */
export class ConstraintError extends DbError {}
/** The sandbox refused the statement; the message says what was refused. */
export class DeniedError extends DbError {}
/** A host limit was exceeded; the message names the limit. */
export class LimitExceededError extends DbError {}
/** The parameters do not match the statement. */
export class InvalidParametersError extends DbError {}
/** The call is not allowed in the current mode (a custom selector writing). */
export class NotAllowedError extends DbError {}
/** Any other SQLite error. */
export class OtherDbError extends DbError {}

const DB_ERRORS = {
  'invalid-sql': InvalidSqlError,
  constraint: ConstraintError,
  denied: DeniedError,
  'limit-exceeded': LimitExceededError,
  'invalid-parameters': InvalidParametersError,
  'not-allowed': NotAllowedError,
  other: OtherDbError,
};

/** A capability refused a call: `capability` is `state`, `queue`,
 * `schedule` or `events`, `kind` the host's variant (`too-large`, `full`,
 * `invalid`, `not-allowed`). The code is the capability's name, as in the
 * Rust SDK. */
export class CapabilityError extends Failure {
  constructor(capability, kind, message) {
    super(capability, message);
    this.capability = capability;
    this.kind = kind;
  }
}

/** A call to another actor did not produce a result. `kind` is `cycle`,
 * `invalid`, `failed` (the callee's own error: its code is kept),
 * `unavailable` or `not-allowed`. */
export class CallError extends Failure {
  constructor(kind, code, message) {
    super(code, message);
    this.kind = kind;
  }
}

/** A step that failed for good: `kind` is `critical`, `timeout`,
 * `exhausted` or `rollback`; `attempts` counts the attempts made. Thrown by
 * `ctx.step` (and uncaught, it fails the workflow); `ctx.tryStep` returns
 * it as data instead. */
export class StepFailure extends Failure {
  constructor(kind, code, message, attempts) {
    super(code, message);
    this.kind = kind;
    this.attempts = attempts;
  }

  /** The failure as plain data. */
  toJSON() {
    return { kind: this.kind, code: this.code, message: this.message, attempts: this.attempts };
  }
}

/** A thrown value as an import's error payload: the payload of a
 * component error, or the value itself. */
export function payloadOf(e) {
  if (e !== null && typeof e === 'object' && Object.prototype.hasOwnProperty.call(e, 'payload')) {
    return e.payload;
  }
  return undefined;
}

/** Calls an import; a WIT error comes back as `convert(payload)`, thrown. */
export function guard(call, convert) {
  try {
    return call();
  } catch (e) {
    const payload = payloadOf(e);
    if (payload === undefined || payload === null || typeof payload.tag !== 'string') throw e;
    if (payload.tag === 'not-in-step') throw new NotInStepError(payload.val);
    throw convert(payload);
  }
}

/** A db-error variant as the error class for it. */
export function dbError({ tag, val }) {
  const cls = DB_ERRORS[tag] ?? OtherDbError;
  return new cls(tag, String(val));
}

/** The text of a thrown value: an Error's message, or the value itself
 * (SpiderMonkey throws the string "out of memory" when the instance's
 * memory limit is reached). */
export function messageOf(e) {
  if (e instanceof Error) return e.message;
  return typeof e === 'string' ? e : describe(e);
}

/** A thrown value as a `Failure`: a Failure stays itself; anything else (a
 * TypeError, a thrown string) becomes code `error` with its text. */
export function asFailure(e) {
  if (e instanceof Failure) return e;
  if (e instanceof Error) return new Failure('error', `${e.name}: ${e.message}`);
  return new Failure('error', `uncaught ${typeof e === 'string' ? e : describe(e)}`);
}

function describe(value) {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** A failure as the WIT record. */
export function toWitFailure(e) {
  const f = asFailure(e);
  return { code: f.code, message: f.message };
}

// Names set by hand: a bundler may rename the classes themselves.
for (const [cls, name] of [
  [Failure, 'Failure'],
  [NotInStepError, 'NotInStepError'],
  [DbError, 'DbError'],
  [InvalidSqlError, 'InvalidSqlError'],
  [ConstraintError, 'ConstraintError'],
  [DeniedError, 'DeniedError'],
  [LimitExceededError, 'LimitExceededError'],
  [InvalidParametersError, 'InvalidParametersError'],
  [NotAllowedError, 'NotAllowedError'],
  [OtherDbError, 'OtherDbError'],
  [CapabilityError, 'CapabilityError'],
  [CallError, 'CallError'],
  [StepFailure, 'StepFailure'],
]) {
  Object.defineProperty(cls.prototype, 'name', { value: name, writable: true, configurable: true });
}
