// The counter actor: a table created in a migration, `increment(amount)` as
// one `UPDATE ... RETURNING`, and `get()`.

import { actor, db } from 'burrow-sdk';

function migrate() {
  db.executeBatch(`
    CREATE TABLE IF NOT EXISTS counter (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        value INTEGER NOT NULL
    );
    INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);`);
}

function increment(amount) {
  return db.queryValue('UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value', [amount]);
}

function get() {
  return db.queryValue('SELECT value FROM counter WHERE id = 1');
}

export default actor({
  migrate,
  actions: { increment: [increment, 'integer'], get },
});
