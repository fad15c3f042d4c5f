"""A chat room (examples/chat-room in Python): connection hooks and events.

A client connects with a name (`burrow watch chat-room-py lobby --params
'{"name": "ada"}'`); the `connect` hook refuses one without, records the
member and broadcasts `joined`; `disconnect` removes it and broadcasts
`left`. `post` stores a message and broadcasts it once it commits.
"""

import time
from typing import Any

import burrow
from burrow import db, events

MAX_NAME = 64
MAX_TEXT = 4000
MAX_HISTORY = 100


def migrate():
    db.execute_batch(
        """CREATE TABLE IF NOT EXISTS messages (
               id INTEGER PRIMARY KEY,
               author TEXT NOT NULL,
               text TEXT NOT NULL,
               at INTEGER NOT NULL
           );
           CREATE TABLE IF NOT EXISTS members (
               connection INTEGER PRIMARY KEY,
               name TEXT NOT NULL
           );"""
    )


def wake():
    """An instance with live connections stays awake, so one that wakes has
    none: members left over from a crash are gone."""
    db.execute("DELETE FROM members")


def valid_name(name):
    return isinstance(name, str) and name.strip() != "" and len(name.encode()) <= MAX_NAME


def join(connection: int, params: Any):
    """Admits a client that connects with a name, and tells the room."""
    name = params.get("name") if isinstance(params, dict) else None
    if not valid_name(name):
        raise burrow.Error("name-required", f'connect with a name of 1 to {MAX_NAME} bytes: {{"name": "ada"}}')
    db.execute("INSERT INTO members (connection, name) VALUES (?, ?)", [connection, name])
    events.broadcast("joined", {"name": name})


def leave(connection: int):
    """Forgets a client that went away, and tells the room."""
    row = db.query("DELETE FROM members WHERE connection = ? RETURNING name", [connection]).first()
    if row is not None:
        events.broadcast("left", {"name": row["name"]})


def post(author: str, text: str) -> int:
    """Posts a message and sends it to every connected client; returns its id."""
    if not valid_name(author):
        raise burrow.Error("name-required", f"the author needs a name of 1 to {MAX_NAME} bytes")
    if not text.strip():
        raise burrow.Error("empty-message", "the message is empty")
    if len(text.encode()) > MAX_TEXT:
        raise burrow.Error("message-too-long", f"the message has {len(text.encode())} bytes, more than {MAX_TEXT}")
    at = time.time_ns() // 1_000_000
    id = db.query_one("INSERT INTO messages (author, text, at) VALUES (?, ?, ?) RETURNING id", [author, text, at])[0]
    events.broadcast("message", {"id": id, "author": author, "text": text, "at": at})
    return id


def history(limit: int) -> list:
    """The newest `limit` messages (at most 100), oldest first."""
    rows = db.query(
        """SELECT id, author, text, at FROM (
               SELECT id, author, text, at FROM messages ORDER BY id DESC LIMIT ?
           ) ORDER BY id""",
        [max(0, min(limit, MAX_HISTORY))],
    )
    return [row.as_dict() for row in rows]


def members() -> list[str]:
    """The names of the connected members, sorted, one per connection."""
    return [row[0] for row in db.query("SELECT name FROM members ORDER BY name")]


burrow.actor(migrate=migrate, wake=wake, connect=join, disconnect=leave, actions=[post, history, members])
