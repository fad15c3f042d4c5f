// A workflow: created with `{"steps": N}`, it counts to N, one durable step
// per increment (each commits its row and its history entry together),
// sleeps a moment durably, then counts once more. Kill the host at any
// point: it resumes where it was, and the count ends at exactly N + 1.
//
// `burrow create {{name}} my-key '{"steps": 3}'`, then
// `burrow inspect {{name}} my-key --history` and `burrow call {{name}} my-key count`.

import { actor, db } from 'burrow-sdk';

function migrate() {
  db.executeBatch(`
    CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
    INSERT OR IGNORE INTO counter VALUES (1, 0);`);
}

/** The count so far, readable while the workflow runs. */
const count = () => db.queryValue('SELECT value FROM counter WHERE id = 1');

function increment() {
  db.execute('UPDATE counter SET value = value + 1 WHERE id = 1');
  return count();
}

async function run(ctx, { steps }) {
  for (let i = 0; i < steps; i++) await ctx.step(`count-${i}`, increment);
  await ctx.sleep('rest', 100);
  return await ctx.step('after-rest', increment);
}

export default actor({
  migrate,
  workflow: [run, { steps: 'integer' }],
  actions: { count },
});
