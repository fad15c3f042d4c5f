"""The actor's state: one JSON value, committed with the call that wrote it.

    count = state.get(default=0)
    state.set({"status": "paid"})
    state.update(lambda s: s.setdefault("seen", []).append(name))

A failure raises a subclass of `StateError` (`TooLarge`, `NotAllowed`,
`NotInStep`); left uncaught, it fails the call with the code `state`.
"""

import copy

from . import _errors, _types
from ._wit import Err
from ._wit import state as _wit


class StateError(_errors.Error):
    """Why the state could not be read or written."""

    code = "state"
    kind = "other"

    def __init__(self, message=""):
        _errors.Error.__init__(self, None, message)


class TooLarge(StateError):
    """The value is larger than the host allows; `limit` is in bytes."""

    kind = "too-large"

    def __init__(self, limit):
        StateError.__init__(self, f"the state is over the limit of {limit} bytes")
        self.limit = limit


class NotAllowed(StateError, _errors.NotAllowed):
    """The call is not allowed in the current mode."""

    code = "not-allowed"
    kind = "not-allowed"


class NotInStep(StateError, _errors.NotInStep):
    """A workflow's orchestration code used the state outside a step."""

    code = "not-in-step"
    kind = "not-in-step"


def _error(e):
    value = e.value
    if isinstance(value, _wit.StateError_TooLarge):
        return TooLarge(value.value)
    if isinstance(value, _wit.StateError_NotInStep):
        return NotInStep(value.value)
    return NotAllowed(value.value)


def get(default=None):
    """The state, decoded from JSON, or `default` if it was never set."""
    try:
        raw = _wit.get()
    except Err as e:
        raise _error(e) from None
    if raw is None:
        return default
    try:
        return _types.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise StateError(f"the stored state is not JSON: {e}") from None


def set(value):
    """Replaces the state with `value` (anything JSON can hold)."""
    try:
        raw = _types.dumps(value).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise _errors.Error("json", f"the state cannot be encoded as JSON: {e}") from None
    try:
        _wit.set(raw)
    except Err as e:
        raise _error(e) from None


def update(fn, default=dict):
    """Reads the state (or `default()`, or a copy of `default` when it is
    not callable, if it was never set), lets `fn` change it in place, writes
    it back and returns what `fn` returned."""
    value = get(_UNSET)
    if value is _UNSET:
        value = default() if callable(default) else copy.deepcopy(default)
    result = fn(value)
    set(value)
    return result


_UNSET = object()
