"""Write Burrow actors in Python.

An actor is a WebAssembly component built with componentize-py: its
actions are plain functions whose arguments are checked against their type
hints, its durable data lives in its own SQLite database (`burrow.db`) and
in one JSON state value (`burrow.state`), and every action runs in one
transaction that the host commits only if the action returns. An actor can
also process a durable queue (`burrow.queue`), run a durable workflow
(`burrow.workflow`), schedule its actions for later (`burrow.schedule`),
call other actors (`burrow.actors`), send events to connected clients
(`burrow.events`) and send HTTP requests where its manifest allows
(`burrow.http`). It can keep actions from clients
(`@burrow.action(internal=True)`) and see who calls (`burrow.caller()`).

    import burrow
    from burrow import db

    def migrate():
        db.execute_batch(
            '''CREATE TABLE IF NOT EXISTS counter (
                   id INTEGER PRIMARY KEY CHECK (id = 1),
                   value INTEGER NOT NULL
               );
               INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);'''
        )

    def increment(amount: int) -> int:
        return db.query_one("UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value", [amount])[0]

    def get() -> int:
        return db.query_one("SELECT value FROM counter WHERE id = 1")[0]

    burrow.actor(migrate=migrate, actions=[increment, get])

Build it with `python -m burrow.build DIR -o counter.wasm` (DIR holds
`app.py`). Raising `burrow.Error(code, message)` rolls the call back and
gives the caller the code and message.
"""

from . import actors, db, events, http, log, queue, schedule, state, workflow
from ._actor import action, actor
from ._caller import Caller, Identity, caller
from ._errors import Error, InvalidArguments, NotAllowed, NotInStep

__all__ = [
    "Caller",
    "Error",
    "Identity",
    "InvalidArguments",
    "NotAllowed",
    "NotInStep",
    "action",
    "actor",
    "actors",
    "caller",
    "db",
    "events",
    "http",
    "log",
    "queue",
    "schedule",
    "state",
    "workflow",
]
