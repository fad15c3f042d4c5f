// A job queue: `enqueue(text)` appends a job to the instance's durable
// queue and returns at once; `process` does one job in the transaction
// that deletes it, so a crash neither loses a job nor does one twice;
// `processed()` counts the jobs done.
//
// `burrow send {{name}} my-key job '{"text": "hello"}' --wait`, and
// `burrow queue {{name}} my-key` for what waits.

import { actor, db, log, queue } from 'burrow-sdk';

function migrate() {
  db.executeBatch(`
    CREATE TABLE IF NOT EXISTS done (
        job INTEGER PRIMARY KEY,
        result TEXT NOT NULL
    );`);
}

/** Queues a job; returns its id. */
const enqueue = (text) => queue.append('job', { text });

function process(event) {
  log.info(`doing job ${event.id}`);
  const result = event.payload.text.toUpperCase();
  db.execute('INSERT INTO done (job, result) VALUES (?, ?)', [event.id, result]);
  return result;
}

/** How many jobs were done. */
const processed = () => db.queryValue('SELECT count(*) FROM done');

export default actor({
  migrate,
  queue: { policy: 'fifo', process },
  actions: { enqueue: [enqueue, 'string'], processed },
});
