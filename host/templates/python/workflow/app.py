"""A workflow: created with `{"steps": N}`, it counts to N, one durable step
per increment (each commits its row and its history entry together),
sleeps a moment durably, then counts once more. Kill the host at any
point: it resumes where it was, and the count ends at exactly N + 1.

`burrow create {{name}} my-key '{"steps": 3}'`, then
`burrow inspect {{name}} my-key --history` and `burrow call {{name}} my-key count`.
"""

from dataclasses import dataclass

import burrow
from burrow import db


@dataclass
class Plan:
    steps: int


def migrate():
    db.execute_batch(
        """CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
           INSERT OR IGNORE INTO counter VALUES (1, 0);"""
    )


def increment():
    db.execute("UPDATE counter SET value = value + 1 WHERE id = 1")
    return count()


def run(ctx, plan: Plan) -> int:
    for i in range(plan.steps):
        ctx.step(f"count-{i}", increment)
    ctx.sleep("rest", 0.1)
    return ctx.step("after-rest", increment)


def count() -> int:
    """The count so far, readable while the workflow runs."""
    return db.query_one("SELECT value FROM counter WHERE id = 1")[0]


burrow.actor(migrate=migrate, workflow=run, actions=[count])
