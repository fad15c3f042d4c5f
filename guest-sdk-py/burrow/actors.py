"""Calls to other actor instances.

A call wakes (or creates) the other instance and runs its action in that
instance's own transaction, which commits before the call returns: it is
not undone if the calling action fails afterwards. The same holds for
`send`. A call back to an instance waiting on the chain (A calls B calls
A) raises `Cycle` instead of a deadlock.

    total = actors.call("counter", "total", "increment", amount)

Inside a workflow, calls and sends are side effects: allowed only in a step.
"""

from . import _errors, _types
from ._wit import Err
from ._wit import actors as _wit
from .schedule import encode_args


class CallError(_errors.Error):
    """Why a call to another instance failed."""

    kind = "other"

    def __init__(self, code, message=""):
        _errors.Error.__init__(self, code, message)


class Failed(CallError):
    """The other instance's action raised this error: its code and message
    are kept."""

    kind = "failed"


class Cycle(CallError):
    """The call would reach an instance already waiting on this chain."""

    kind = "cycle"

    def __init__(self, message=""):
        CallError.__init__(self, "cycle", message)


class Invalid(CallError):
    """Unknown actor or action, a bad key, arguments that do not fit."""

    kind = "invalid"

    def __init__(self, message=""):
        CallError.__init__(self, "invalid", message)


class Unavailable(CallError):
    """The other instance could not answer (it trapped, timed out, is
    overloaded, its queue is full); `reason` is the host's code."""

    kind = "unavailable"

    def __init__(self, reason, message=""):
        CallError.__init__(self, "unavailable", f"{reason}: {message}")
        self.reason = reason


class NotAllowed(CallError, _errors.NotAllowed):
    """The call is not allowed in the current mode."""

    kind = "not-allowed"

    def __init__(self, message=""):
        CallError.__init__(self, "not-allowed", message)


class NotInStep(CallError, _errors.NotInStep):
    """A workflow's orchestration code called outside a step."""

    kind = "not-in-step"

    def __init__(self, message=""):
        CallError.__init__(self, "not-in-step", message)


def _error(e):
    value = e.value
    if isinstance(value, _wit.CallError_Failed):
        return Failed(value.value.code, value.value.message)
    if isinstance(value, _wit.CallError_Unavailable):
        return Unavailable(value.value.code, value.value.message)
    if isinstance(value, _wit.CallError_Cycle):
        return Cycle(value.value)
    if isinstance(value, _wit.CallError_NotInStep):
        return NotInStep(value.value)
    if isinstance(value, _wit.CallError_NotAllowed):
        return NotAllowed(value.value)
    return Invalid(value.value)


def call(actor, key, action, *args):
    """Calls `action(*args)` on the instance (`actor`, `key`) and returns its
    result, decoded from JSON."""
    try:
        result = _wit.call(actor, key, action, encode_args(args))
    except Err as e:
        raise _error(e) from None
    try:
        return _types.loads(result)
    except ValueError as e:
        raise _errors.Error("json", f"the result of {actor}/{key} {action} is not JSON: {e}") from None


def send(actor, key, event_type, payload=None, *, priority=0, group=None):
    """Appends an event to the queue of the instance (`actor`, `key`);
    returns the event's id."""
    try:
        text = _types.dumps(payload)
    except (TypeError, ValueError) as e:
        raise _errors.Error("json", f"the payload cannot be encoded as JSON: {e}") from None
    try:
        return _wit.send(actor, key, event_type, text, _wit.SendOptions(priority, group))
    except Err as e:
        raise _error(e) from None
