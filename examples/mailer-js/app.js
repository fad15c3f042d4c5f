// The welcome-email job queue in JavaScript, like examples/mailer:
// `enqueue(email)` appends a job to the instance's durable queue, and
// `process` records the email as sent in the transaction that deletes the
// job, so a crash neither loses a job nor sends one twice.

import { actor, db, log, queue } from 'burrow-sdk';

function migrate() {
  db.executeBatch(`
    CREATE TABLE IF NOT EXISTS sent (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job INTEGER NOT NULL UNIQUE,
        email TEXT NOT NULL,
        attempt INTEGER NOT NULL
    );`);
}

/** Queues a welcome email; returns the job's id. */
const enqueue = (email) => queue.append('welcome', { email });

/** Queues a welcome email for each address, in one transaction. */
function enqueueMany(emails) {
  for (const email of emails) queue.append('welcome', { email });
  return emails.length;
}

function process(event) {
  const { email } = event.payload;
  log.info(`sending welcome email to ${email}`);
  db.execute('INSERT INTO sent (job, email, attempt) VALUES (?, ?, ?)', [event.id, email, event.attempt]);
  return `sent to ${email}`;
}

/** Emails sent so far, in order. */
const sent = () => db.query('SELECT email FROM sent ORDER BY id').map((row) => row.email);

export default actor({
  migrate,
  queue: { policy: 'fifo', process },
  actions: { enqueue: [enqueue, 'string'], enqueue_many: [enqueueMany, ['string']], sent },
});
