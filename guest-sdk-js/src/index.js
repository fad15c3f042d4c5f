// burrow-sdk: write Burrow actors in JavaScript.
//
//     import { actor, db } from 'burrow-sdk';
//
//     function migrate() {
//       db.executeBatch(`CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
//                        INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);`);
//     }
//     const increment = (amount) => db.queryValue('UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value', [amount]);
//     const get = () => db.queryValue('SELECT value FROM counter WHERE id = 1');
//
//     export default actor({ migrate, actions: { increment: [increment, 'integer'], get } });
//
// Build it with `node guest-sdk-js/build.mjs app.js app.wasm`.

export { actor } from './actor.js';
export { caller, callerJson } from './caller.js';
export {
  Failure,
  NotInStepError,
  DbError,
  InvalidSqlError,
  ConstraintError,
  DeniedError,
  LimitExceededError,
  InvalidParametersError,
  NotAllowedError,
  OtherDbError,
  CapabilityError,
  CallError,
  StepFailure,
} from './errors.js';
export { Ctx, WorkflowInterrupt } from './workflow.js';
export { fetch, HttpError } from './http.js';
export * as db from './db.js';
export * as state from './state.js';
export * as log from './log.js';
export * as queue from './queue.js';
export * as schedule from './schedule.js';
export * as actors from './actors.js';
export * as events from './events.js';
