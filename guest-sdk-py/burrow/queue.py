"""The instance's durable queue: append events, and process them one
transaction each.

An actor with a queue gives `burrow.actor` a policy and a `process`
function (and, for `Policy.custom()`, a `select` function):

    def process(event):
        burrow.log.info(f"welcome, {event.payload['email']}")
        return "sent"

    def enqueue(email: str) -> int:
        return queue.append("welcome", {"email": email})

    burrow.actor(policy=queue.Policy.fifo(), process=process, actions=[enqueue])

`process` runs in one transaction that also deletes the event: if it
returns, its writes and the deletion commit together; if it raises, every
write is rolled back and the event is retried later, with backoff, until
the host moves it to the dead-letter table.
"""

from dataclasses import dataclass

from . import _errors, _types
from ._wit import Err
from ._wit import processor as _processor
from ._wit import queue as _wit


class QueueError(_errors.Error):
    """Why an event could not be appended."""

    code = "queue"
    kind = "other"

    def __init__(self, message=""):
        _errors.Error.__init__(self, None, message)


class TooLarge(QueueError):
    """The payload is larger than the host allows; `limit` is in bytes."""

    kind = "too-large"

    def __init__(self, limit):
        QueueError.__init__(self, f"the payload is over the limit of {limit} bytes")
        self.limit = limit


class Full(QueueError):
    """The queue holds as many pending events as the host allows."""

    kind = "full"

    def __init__(self, limit):
        QueueError.__init__(self, f"the queue is full ({limit} pending events)")
        self.limit = limit


class Invalid(QueueError):
    """The type, group or payload is not acceptable; the message says why."""

    kind = "invalid"


class NotAllowed(QueueError, _errors.NotAllowed):
    """The instance has no queue, or the current mode forbids appending."""

    code = "not-allowed"
    kind = "not-allowed"


class NotInStep(QueueError, _errors.NotInStep):
    """A workflow's orchestration code appended outside a step."""

    code = "not-in-step"
    kind = "not-in-step"


def _error(e):
    value = e.value
    if isinstance(value, _wit.QueueError_TooLarge):
        return TooLarge(value.value)
    if isinstance(value, _wit.QueueError_Full):
        return Full(value.value)
    if isinstance(value, _wit.QueueError_NotInStep):
        return NotInStep(value.value)
    if isinstance(value, _wit.QueueError_NotAllowed):
        return NotAllowed(value.value)
    return Invalid(value.value)


@dataclass
class Event:
    """One queued event, as `process`, `select` and a workflow's queue waits
    see it."""

    id: int
    """Unique within the instance."""
    type: str
    """The sender's event type."""
    payload: object
    """The payload, decoded from JSON."""
    payload_json: str
    """The payload as JSON text."""
    priority: int
    """Lower values are processed first."""
    group: str | None
    """The event's group, None for the default group."""
    created_at: int
    """When it was appended, in milliseconds since the Unix epoch."""
    attempt: int
    """1 for the first attempt, 2 for the first retry, and so on."""

    @classmethod
    def _from_wit(cls, e):
        try:
            payload = _types.loads(e.payload)
        except ValueError:
            payload = None
        return cls(e.id, e.event_type, payload, e.payload, e.priority, e.group, e.created_at, e.attempt)


def _payload_json(payload):
    try:
        return _types.dumps(payload)
    except (TypeError, ValueError) as e:
        raise _errors.Error("json", f"the payload cannot be encoded as JSON: {e}") from None


def append(event_type, payload=None, *, priority=0, group=None):
    """Appends an event to this instance's queue and returns its id. It
    exists once the current call commits. Lower `priority` values go
    first; events of one `group` share the policy's concurrency."""
    options = _wit.AppendOptions(priority, group)
    try:
        return _wit.append(event_type, _payload_json(payload), options)
    except Err as e:
        raise _error(e) from None


class Policy:
    """How pending events are picked, and how many are processed at once
    (one per group unless `concurrency` says otherwise)."""

    MODES = ("fifo", "lifo", "random", "custom")

    def __init__(self, mode, concurrency=1):
        if mode not in self.MODES:
            raise ValueError(f"unknown queue mode {mode!r}; use one of {', '.join(self.MODES)}")
        if concurrency is not None and (type(concurrency) is not int or concurrency < 1):
            raise ValueError("a policy's concurrency is at least 1, or None for unlimited")
        self.mode = mode
        self.max_concurrency = concurrency

    @classmethod
    def fifo(cls):
        """Lowest priority value first, then oldest first. One at a time."""
        return cls("fifo")

    @classmethod
    def lifo(cls):
        """Lowest priority value first, then newest first. One at a time."""
        return cls("lifo")

    @classmethod
    def random(cls):
        """Lowest priority value first, then at random. One at a time."""
        return cls("random")

    @classmethod
    def custom(cls):
        """The actor's `select` function picks among the pending events."""
        return cls("custom")

    def concurrency(self, n):
        """At most `n` (at least 1) `process` calls in flight per group."""
        return Policy(self.mode, n)

    def unlimited(self):
        """No limit per group (the host still caps calls per instance)."""
        return Policy(self.mode, None)

    def __eq__(self, other):
        return isinstance(other, Policy) and (self.mode, self.max_concurrency) == (other.mode, other.max_concurrency)

    def __repr__(self):
        return f"Policy({self.mode!r}, concurrency={self.max_concurrency!r})"

    def _to_wit(self):
        mode = getattr(_processor.QueueMode, self.mode.upper())
        return _processor.QueuePolicy(mode, self.max_concurrency)
