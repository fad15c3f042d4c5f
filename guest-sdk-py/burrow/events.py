"""Events for the clients connected to this instance.

Clients connect over a WebSocket (`GET /actors/{actor}/{key}/connect`, or
`burrow watch ACTOR KEY`). `broadcast` sends an event to all of them once
the current call commits; nothing is sent if it rolls back. The actor's
`connect` hook (`connect(id, params)`) may refuse a client by raising, and
`disconnect(id)` hears that it left.
"""

from . import _errors, _types
from ._wit import Err
from ._wit import events as _wit


class EventError(_errors.Error):
    """Why an event was refused."""

    code = "events"
    kind = "other"

    def __init__(self, message=""):
        _errors.Error.__init__(self, None, message)


class Invalid(EventError):
    """The name or the payload is not acceptable."""

    kind = "invalid"


class NotAllowed(EventError, _errors.NotAllowed):
    """The call is not allowed in the current mode."""

    code = "not-allowed"
    kind = "not-allowed"


class NotInStep(EventError, _errors.NotInStep):
    """A workflow's orchestration code broadcast outside a step."""

    code = "not-in-step"
    kind = "not-in-step"


def broadcast(name, payload=None):
    """Sends the event `name` with `payload` (as JSON) to every connected
    client once the current call commits."""
    try:
        text = _types.dumps(payload)
    except (TypeError, ValueError) as e:
        raise _errors.Error("json", f"the payload cannot be encoded as JSON: {e}") from None
    try:
        _wit.broadcast(name, text)
    except Err as e:
        value = e.value
        if isinstance(value, _wit.EventError_NotInStep):
            raise NotInStep(value.value) from None
        if isinstance(value, _wit.EventError_NotAllowed):
            raise NotAllowed(value.value) from None
        raise Invalid(value.value) from None
