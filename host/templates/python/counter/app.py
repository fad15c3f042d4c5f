"""The counter actor: a table created in a migration, `increment(amount)` as
one `UPDATE ... RETURNING`, and `get()`.
"""

import burrow
from burrow import db


def migrate():
    db.execute_batch(
        """CREATE TABLE IF NOT EXISTS counter (
               id INTEGER PRIMARY KEY CHECK (id = 1),
               value INTEGER NOT NULL
           );
           INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);"""
    )


def increment(amount: int) -> int:
    return db.query_one("UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value", [amount])[0]


def get() -> int:
    return db.query_one("SELECT value FROM counter WHERE id = 1")[0]


burrow.actor(migrate=migrate, actions=[increment, get])
