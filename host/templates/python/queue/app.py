"""A job queue: `enqueue(text)` appends a job to the instance's durable
queue and returns at once; `process` does one job in the transaction that
deletes it, so a crash neither loses a job nor does one twice;
`processed()` counts the jobs done.

`burrow send {{name}} my-key job '{"text": "hello"}' --wait`, and
`burrow queue {{name}} my-key` for what waits.
"""

import burrow
from burrow import db, log, queue


def migrate():
    db.execute_batch(
        """CREATE TABLE IF NOT EXISTS done (
               job INTEGER PRIMARY KEY,
               result TEXT NOT NULL
           );"""
    )


def enqueue(text: str) -> int:
    """Queues a job; returns its id."""
    return queue.append("job", {"text": text})


def process(event):
    log.info(f"doing job {event.id}")
    result = event.payload["text"].upper()
    db.execute("INSERT INTO done (job, result) VALUES (?, ?)", [event.id, result])
    return result


def processed() -> int:
    """How many jobs were done."""
    return db.query_one("SELECT count(*) FROM done")[0]


burrow.actor(
    migrate=migrate,
    policy=queue.Policy.fifo(),
    process=process,
    actions=[enqueue, processed],
)
