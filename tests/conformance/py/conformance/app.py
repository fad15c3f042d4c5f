"""The conformance suite's plain actor in Python: the counter, argument
checks, state, database errors, the queue under every policy, schedules,
broadcasts and calls. tests/conformance/SPEC.md says what each action does.
"""

import json
from dataclasses import dataclass
from typing import Any, Literal, Optional

import burrow
from burrow import actors, db, events, http, queue, schedule, state
from burrow.queue import Policy


def migrate():
    db.execute_batch(
        """CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
           INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);
           CREATE TABLE IF NOT EXISTS config (name TEXT PRIMARY KEY, value TEXT NOT NULL);
           CREATE TABLE IF NOT EXISTS processed (
               seq INTEGER PRIMARY KEY AUTOINCREMENT,
               event INTEGER NOT NULL,
               type TEXT NOT NULL,
               label TEXT NOT NULL,
               priority INTEGER NOT NULL,
               grp TEXT,
               attempt INTEGER NOT NULL
           );
           CREATE TABLE IF NOT EXISTS notes (seq INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT NOT NULL);
           CREATE TABLE IF NOT EXISTS members (connection INTEGER PRIMARY KEY, name TEXT NOT NULL);"""
    )


@dataclass
class Create:
    policy: Literal["fifo", "lifo", "random", "custom"]


def create(input: Optional[Create]):
    if input is not None:
        db.execute("INSERT INTO config (name, value) VALUES ('policy', ?)", [input.policy])


def wake():
    db.execute("DELETE FROM members")


def connect(connection: int, params: Any):
    name = params.get("name") if isinstance(params, dict) else None
    if not isinstance(name, str) or not name or len(name.encode()) > 64:
        raise burrow.Error("name-required", 'connect with {"name": "ada"}')
    db.execute("INSERT INTO members (connection, name) VALUES (?, ?)", [connection, name])
    events.broadcast("joined", {"name": name})


def disconnect(connection: int):
    row = db.query("DELETE FROM members WHERE connection = ? RETURNING name", [connection]).first()
    if row is not None:
        events.broadcast("left", {"name": row[0]})


def policy():
    """The policy recorded by `create`: the host asks once, after the hooks."""
    row = db.query("SELECT value FROM config WHERE name = 'policy'").first()
    return Policy(row[0] if row else "fifo")


def process(event):
    label, fail = event.payload["label"], event.payload.get("fail", 0)
    db.execute(
        "INSERT INTO processed (event, type, label, priority, grp, attempt) VALUES (?, ?, ?, ?, ?, ?)",
        [event.id, event.type, label, event.priority, event.group, event.attempt],
    )
    if event.attempt <= fail:
        raise burrow.Error("planned-failure", f"event {label} failed attempt {event.attempt}")
    return {"label": label, "attempt": event.attempt}


def select(pending):
    """The pending event with the smallest label, ties by id."""
    first = min(pending, key=lambda e: (e.payload["label"], e.id))
    return [first.id]


def increment(amount: int) -> int:
    return db.query_one("UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value", [amount])[0]


def get() -> int:
    return db.query_one("SELECT value FROM counter WHERE id = 1")[0]


def add_then_fail(amount: int):
    increment(amount)
    raise burrow.Error("planned", f"added {amount}, then failed")


def add_then_crash(amount: int):
    increment(amount)
    return 1 // 0


def echo(i: int, f: float, s: str, b: bool, l: list[int], o: Any):
    return [i, f, s, b, l, o]


def bump(name: str) -> int:
    def add(counts):
        counts[name] = counts.get(name, 0) + 1
        return counts[name]

    return state.update(add)


def get_state():
    return state.get()


def rows():
    row = db.query("SELECT 1 AS one, 'two' AS two, NULL AS three, 2.5 AS four, x'00ff' AS five").first()
    return [row[0], row["two"], row["three"], row["four"], list(row["five"]), row["one"]]


DB_ERRORS = {
    "invalid-sql": ("SELEC 1", db.InvalidSql),
    "constraint": ("INSERT INTO counter (id, value) VALUES (1, 0)", db.Constraint),
    "denied": ("SELECT * FROM _burrow_state", db.Denied),
    "invalid-parameters": ("SELECT ?", db.InvalidParameters),
}


def db_error(kind: str) -> str:
    sql, expected = DB_ERRORS[kind]
    try:
        db.query(sql)
    except expected:
        return kind
    except Exception as e:
        return f"other: {e!r}"
    return "other: no error"


def db_uncaught():
    db.execute("SELEC 1")


def enqueue(type: str, payload: Any, priority: int, group: Optional[str]) -> int:
    return queue.append(type, payload, priority=priority, group=group)


@dataclass
class NewEvent:
    type: str
    payload: Any
    priority: int = 0
    group: Optional[str] = None


def enqueue_many(events: list[NewEvent]) -> list[int]:
    return [queue.append(e.type, e.payload, priority=e.priority, group=e.group) for e in events]


def processed():
    rows = db.query("SELECT label, attempt, priority, grp FROM processed ORDER BY seq")
    return [{"label": r[0], "attempt": r[1], "priority": r[2], "group": r[3]} for r in rows]


def schedule_note(note: str, delay_ms: int) -> int:
    return schedule.after(delay_ms, "note", note)


def note(note: str):
    db.execute("INSERT INTO notes (note) VALUES (?)", [note])


def notes() -> list[str]:
    return [row[0] for row in db.query("SELECT note FROM notes ORDER BY seq")]


def schedules():
    return [{"id": s.id, "action": s.action, "args": s.args} for s in schedule.pending()]


def cancel(id: int) -> bool:
    return schedule.cancel(id)


def say(text: str):
    events.broadcast("said", {"text": text})


def say_then_fail(text: str):
    say(text)
    raise burrow.Error("planned", "said, then failed")


def members() -> list[str]:
    return [row[0] for row in db.query("SELECT name FROM members ORDER BY name")]


def relay(actor: str, key: str, action: str, args: list):
    return actors.call(actor, key, action, *args)


def relay_send(actor: str, key: str, type: str, payload: Any) -> int:
    return actors.send(actor, key, type, payload)


def whoami():
    return burrow.caller().to_json()


@burrow.action(internal=True)
def secret(note: str):
    caller = burrow.caller()
    db.execute("INSERT INTO notes (note) VALUES (?)", [f"{note} from {caller.kind}"])
    return caller.to_json()


def schedule_secret(note: str, delay_ms: int) -> int:
    return schedule.after(delay_ms, "secret", note)


def http_get(url: str):
    try:
        answer = http.get(url)
    except http.NotInStep as e:
        return {"error": "not-in-step", "message": e.message}
    except http.NotAllowed as e:
        return {"error": "not-allowed", "message": e.message}
    except http.Denied as e:
        return {"error": "denied", "message": e.message}
    except http.Invalid as e:
        return {"error": "invalid", "message": e.message}
    except http.Failed as e:
        return {"error": "failed", "message": e.message}
    return {"status": answer.status, "body": answer.text()}


@http.handler
def hook(request: http.Incoming) -> http.Reply:
    count = increment(1)
    if request.path == "/fail":
        raise burrow.Error("planned", "counted, then failed")
    return http.Reply(
        201,
        [("content-type", "application/json"), ("x-conformance", "yes")],
        json.dumps({
            "count": count,
            "method": request.method,
            "path": request.path,
            "body": request.text(),
            "signature": request.header("x-signature"),
        }),
    )


burrow.action(get_state, name="state")
burrow.actor(
    migrate=migrate,
    create=create,
    wake=wake,
    policy=policy,
    process=process,
    select=select,
    connect=connect,
    disconnect=disconnect,
    actions=[
        increment, get, add_then_fail, add_then_crash, echo, bump, rows, db_error,
        db_uncaught, enqueue, enqueue_many, processed, schedule_note, note, notes,
        schedules, cancel, say, say_then_fail, members, relay, relay_send,
        whoami, schedule_secret, http_get,
    ],
    internal_from_actors=False,
)
