// The smallest workflow in JavaScript, like examples/stepper: it counts to
// `steps`, one step per increment, each committing its row and its history
// entry together, then (if asked) sleeps durably and counts once more.
// `burrow create stepper-js demo '{"steps": 100}'`, then
// `burrow call stepper-js demo count`. The benchmark W5 uses it.

import { actor, db } from 'burrow-sdk';

function migrate() {
  db.executeBatch(`
    CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
    INSERT OR IGNORE INTO counter VALUES (1, 0);`);
}

/** The counter, readable while the workflow runs. */
const count = () => db.queryValue('SELECT value FROM counter WHERE id = 1');

function increment() {
  db.execute('UPDATE counter SET value = value + 1 WHERE id = 1');
  return count();
}

async function run(ctx, { steps, then_sleep_ms: sleepMs }) {
  let last = 0;
  for (let i = 0; i < steps; i++) last = await ctx.step(`step-${i}`, increment);
  if (sleepMs != null) {
    await ctx.sleep('rest', sleepMs);
    last = await ctx.step('after-rest', increment);
  }
  return last;
}

export default actor({
  migrate,
  workflow: [run, { steps: 'integer', then_sleep_ms: 'integer?' }],
  actions: { count },
});
