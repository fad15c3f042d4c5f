"""The counter actor in Python: a table created in a migration,
`increment(amount)` as one `UPDATE ... RETURNING`, and `get()`.

A port of examples/counter (Rust) with the same actions and the same errors
as the Rust SDK. Build it with componentize-py: see build.sh.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import db
from wit_world.imports.types import (
    ActionError_Failed,
    ActionError_InvalidArguments,
    ActionError_UnknownAction,
    Failure,
)


def query_int(sql, params=()):
    """The first column of the first row as an integer, like `db::query_one(..)?.get(0)`."""
    try:
        rows = db.execute(sql, list(params)).rows
    except Err as e:
        raise db_failure(e)
    if not rows:
        raise Err(Failure("no-rows", f"the statement returned no rows: {sql}"))
    value = rows[0][0]
    if not isinstance(value, db.Value_Integer):
        raise Err(Failure("type-mismatch", f"expected an integer, found {value}"))
    return value.value


def db_failure(e):
    """A db-error as the failure the Rust SDK makes of it: code `db`, its Debug text."""
    variant = type(e.value).__name__.removeprefix("DbError_")
    text = json.dumps(e.value.value, ensure_ascii=False)
    return Err(Failure("db", f"DbError::{variant}({text})"))


def migrate():
    try:
        db.execute_batch(
            """CREATE TABLE IF NOT EXISTS counter (
                   id INTEGER PRIMARY KEY CHECK (id = 1),
                   value INTEGER NOT NULL
               );
               INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);"""
        )
    except Err as e:
        raise db_failure(e)


def increment(amount):
    return query_int(
        "UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value",
        [db.Value_Integer(amount)],
    )


def get():
    return query_int("SELECT value FROM counter WHERE id = 1")


# The actions and their number of arguments; every argument is an i64.
ACTIONS = {"increment": (increment, 1), "get": (get, 0)}


def invalid(message):
    return Err(ActionError_InvalidArguments(message))


class Guest(exports.Guest):
    def migrate(self):
        migrate()

    def create(self, input):
        pass

    def wake(self):
        pass

    def sleep(self):
        pass

    def destroy(self):
        pass

    def action(self, name, args):
        # Same order of checks as the Rust SDK: the JSON array, the name, the arguments.
        try:
            values = json.loads(args)
        except ValueError as e:
            raise invalid(f"arguments are not valid JSON: {e}")
        if not isinstance(values, list):
            raise invalid("arguments must be a JSON array")
        if name not in ACTIONS:
            raise Err(ActionError_UnknownAction(name))
        f, arity = ACTIONS[name]
        if len(values) != arity:
            s = "" if arity == 1 else "s"
            raise invalid(f"expected {arity} argument{s}, got {len(values)}")
        for i, value in enumerate(values, 1):
            # `type(...) is int` leaves out bools; json.loads reads 1.0 as a float.
            if type(value) is not int or not -(2**63) <= value < 2**63:
                raise invalid(f"argument {i}: expected i64, found {json.dumps(value)}")
        try:
            return json.dumps(f(*values))
        except Err as e:
            raise Err(ActionError_Failed(e.value))
