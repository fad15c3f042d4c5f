"""The smallest workflow (examples/stepper in Python): it counts to
`steps`, one step per increment, each committing its row and its history
entry together, then (if asked) sleeps durably and counts once more.

`burrow create stepper-py demo '{"steps": 100}'`, then
`burrow call stepper-py demo count`. The benchmark W5 uses it.
"""

from dataclasses import dataclass
from typing import Optional

import burrow
from burrow import db


@dataclass
class Plan:
    steps: int
    then_sleep_ms: Optional[int] = None


def migrate():
    db.execute_batch(
        """CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
           INSERT OR IGNORE INTO counter VALUES (1, 0);"""
    )


def increment():
    db.execute("UPDATE counter SET value = value + 1 WHERE id = 1")
    return count()


def run(ctx, plan: Plan) -> int:
    last = 0
    for i in range(plan.steps):
        last = ctx.step(f"step-{i}", increment)
    if plan.then_sleep_ms is not None:
        ctx.sleep("rest", plan.then_sleep_ms / 1000)
        last = ctx.step("after-rest", increment)
    return last


def count() -> int:
    """The counter, readable while the workflow runs."""
    return db.query_one("SELECT value FROM counter WHERE id = 1")[0]


burrow.actor(migrate=migrate, workflow=run, actions=[count])
