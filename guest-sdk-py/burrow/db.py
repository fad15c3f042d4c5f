"""The instance's own SQLite database.

Every statement runs inside the transaction of the current call, so an
action's writes commit together or not at all.

    rows = db.query("SELECT id, name FROM users WHERE age > ?", [18])
    for row in rows:
        print(row[0], row["name"])
    value = db.query_one("SELECT value FROM counter WHERE id = 1")[0]

Values map to Python as NULL ↔ None, INTEGER ↔ int (bool too, as 0/1),
REAL ↔ float, TEXT ↔ str, BLOB ↔ bytes. A failing statement raises a
subclass of `DbError` per kind of failure (`InvalidSql`, `Constraint`,
`Denied`, `LimitExceeded`, `InvalidParameters`, `NotAllowed`, `NotInStep`,
`Other`); left uncaught, it fails the call with the code `db`.
"""

from . import _errors
from ._wit import AVAILABLE, Err
from ._wit import db as _wit

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1


class DbError(_errors.Error):
    """Why a statement failed, as the host reports it. `kind` names the WIT
    variant (`invalid-sql`, `constraint`, ...); `message` is the host's
    text."""

    code = "db"
    kind = "other"

    def __init__(self, message=""):
        _errors.Error.__init__(self, None, message)

    def failure_message(self):
        return f"{self.kind}: {self.message}"


class InvalidSql(DbError):
    """The SQL text could not be parsed or refers to something unknown."""

    kind = "invalid-sql"


class Constraint(DbError):
    """A constraint (unique, not null, check, foreign key) failed."""

    kind = "constraint"


class Denied(DbError):
    """The sandbox refused the statement (internal tables, ATTACH, pragmas,
    transactions)."""

    kind = "denied"


class LimitExceeded(DbError):
    """A host limit was exceeded; the message names it."""

    kind = "limit-exceeded"


class InvalidParameters(DbError):
    """The parameters do not match the statement."""

    kind = "invalid-parameters"


class NotAllowed(DbError, _errors.NotAllowed):
    """The call is not allowed in the current mode."""

    code = "not-allowed"
    kind = "not-allowed"


class NotInStep(DbError, _errors.NotInStep):
    """A workflow's orchestration code ran a statement outside a step."""

    code = "not-in-step"
    kind = "not-in-step"

    def failure_message(self):
        return self.message


class Other(DbError):
    """Any other SQLite error."""

    kind = "other"


if AVAILABLE:
    _ERRORS = {
        _wit.DbError_InvalidSql: InvalidSql,
        _wit.DbError_Constraint: Constraint,
        _wit.DbError_Denied: Denied,
        _wit.DbError_LimitExceeded: LimitExceeded,
        _wit.DbError_InvalidParameters: InvalidParameters,
        _wit.DbError_NotAllowed: NotAllowed,
        _wit.DbError_NotInStep: NotInStep,
        _wit.DbError_Other: Other,
    }


def _error(e):
    return _ERRORS.get(type(e.value), Other)(e.value.value)


def _to_value(i, value):
    if value is None:
        return _wit.Value_Null()
    if isinstance(value, bool):
        return _wit.Value_Integer(int(value))
    if isinstance(value, int):
        if not I64_MIN <= value <= I64_MAX:
            raise InvalidParameters(f"parameter {i}: {value} is out of the range of a 64-bit integer")
        return _wit.Value_Integer(value)
    if isinstance(value, float):
        return _wit.Value_Real(value)
    if isinstance(value, str):
        return _wit.Value_Text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _wit.Value_Blob(bytes(value))
    raise InvalidParameters(
        f"parameter {i}: a {type(value).__name__} is no database value "
        "(use None, bool, int, float, str or bytes)"
    )


def _from_value(value):
    if isinstance(value, _wit.Value_Null):
        return None
    return value.value


class Row:
    """One row: `row[0]` by position, `row["name"]` by column name."""

    __slots__ = ("_columns", "values")

    def __init__(self, columns, values):
        self._columns = columns
        self.values = values

    def __getitem__(self, index):
        if isinstance(index, str):
            try:
                return self.values[self._columns.index(index)]
            except ValueError:
                raise _errors.Error("no-such-column", f"no column named {index}") from None
        try:
            return self.values[index]
        except IndexError:
            raise _errors.Error(
                "no-such-column", f"column {index} out of range ({len(self.values)} columns)"
            ) from None

    def get(self, name, default=None):
        """The value of column `name`, or `default` if there is no such column."""
        try:
            return self.values[self._columns.index(name)]
        except ValueError:
            return default

    def __len__(self):
        return len(self.values)

    def __iter__(self):
        return iter(self.values)

    def keys(self):
        """The column names."""
        return list(self._columns)

    def as_dict(self):
        """The row as a dict from column name to value."""
        return dict(zip(self._columns, self.values))

    def __eq__(self, other):
        if isinstance(other, Row):
            return self.values == other.values
        return self.values == other

    def __repr__(self):
        return f"Row({self.as_dict()!r})"


class Rows:
    """The rows a statement returned, with its column names, the rows it
    changed and the rowid of the last INSERT."""

    def __init__(self, columns, rows, changes, last_insert_rowid):
        self.columns = columns
        self.rows = [Row(columns, values) for values in rows]
        self.changes = changes
        self.last_insert_rowid = last_insert_rowid

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        return self.rows[index]

    def first(self):
        """The first row, or None."""
        return self.rows[0] if self.rows else None

    def __repr__(self):
        return f"Rows({self.columns!r}, {len(self.rows)} rows)"


def query(sql, params=()):
    """Runs one statement with positional parameters (`?`) and returns its rows."""
    if isinstance(params, (str, bytes, dict)) or not hasattr(params, "__iter__"):
        raise InvalidParameters("the parameters must be a list or a tuple of values")
    values = [_to_value(i, p) for i, p in enumerate(params, 1)]
    try:
        result = _wit.execute(sql, values)
    except Err as e:
        raise _error(e) from None
    rows = [[_from_value(v) for v in row] for row in result.rows]
    return Rows(result.columns, rows, result.changes, result.last_insert_rowid)


def query_one(sql, params=()):
    """Runs one statement and returns its first row; raises
    `burrow.Error("no-rows")` if it returned none."""
    row = query(sql, params).first()
    if row is None:
        raise _errors.Error("no-rows", f"the statement returned no rows: {sql}")
    return row


def execute(sql, params=()):
    """Runs one statement and returns the number of rows it changed."""
    return query(sql, params).changes


def execute_batch(sql):
    """Runs several statements separated by `;`, without parameters (a
    migration)."""
    try:
        _wit.execute_batch(sql)
    except Err as e:
        raise _error(e) from None
