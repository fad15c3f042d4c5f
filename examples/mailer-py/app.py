"""The welcome-email job queue, without the loss (examples/mailer in Python).

`enqueue(email)` appends a job to the instance's durable queue; it exists
once the call returns. `process` sends one welcome email and records it in
the `sent` table in the same transaction that deletes the job, so a crash
at any point neither loses a job nor records a send twice.
"""

import burrow
from burrow import db, log, queue


def migrate():
    db.execute_batch(
        """CREATE TABLE IF NOT EXISTS sent (
               id INTEGER PRIMARY KEY AUTOINCREMENT,
               job INTEGER NOT NULL UNIQUE,
               email TEXT NOT NULL,
               attempt INTEGER NOT NULL
           );"""
    )


def enqueue(email: str) -> int:
    """Queues a welcome email; returns the job's id."""
    return queue.append("welcome", {"email": email})


def enqueue_many(emails: list[str]) -> int:
    """Queues a welcome email for each address, in one transaction."""
    for email in emails:
        queue.append("welcome", {"email": email})
    return len(emails)


def process(event):
    email = event.payload["email"]
    log.info(f"sending welcome email to {email}")
    db.execute("INSERT INTO sent (job, email, attempt) VALUES (?, ?, ?)", [event.id, email, event.attempt])
    return f"sent to {email}"


def sent() -> list[str]:
    """Emails sent so far, in order."""
    return [row[0] for row in db.query("SELECT email FROM sent ORDER BY id")]


burrow.actor(
    migrate=migrate,
    policy=queue.Policy.fifo(),
    process=process,
    actions=[enqueue, enqueue_many, sent],
)
