"""Actions to run later.

A schedule is written in the current call's transaction (it exists once
that call commits, and not at all if it rolls back) and runs its action
once, in a transaction of its own, at or after its time: across sleep,
eviction, restarts and crashes.

    def remind(text: str, delay_ms: int) -> int:
        return schedule.after(delay_ms, "fire", text)

    def fire(text: str):
        log.info(f"reminder: {text}")

If the action fails, it is not run again: its error goes to the host's log
and the schedule is gone. A recurring schedule (`every`) runs at each
interval until it is cancelled.
"""

from dataclasses import dataclass

from . import _errors, _types
from ._wit import Err
from ._wit import schedule as _wit


class ScheduleError(_errors.Error):
    """Why a schedule was refused."""

    code = "schedule"
    kind = "other"

    def __init__(self, message=""):
        _errors.Error.__init__(self, None, message)


class Invalid(ScheduleError):
    """The action name or the arguments are not acceptable."""

    kind = "invalid"


class Full(ScheduleError):
    """The instance has as many pending schedules as the host allows."""

    kind = "full"

    def __init__(self, limit):
        ScheduleError.__init__(self, f"the instance has {limit} pending schedules, the most it may have")
        self.limit = limit


class NotAllowed(ScheduleError, _errors.NotAllowed):
    """The call is not allowed in the current mode."""

    code = "not-allowed"
    kind = "not-allowed"


class NotInStep(ScheduleError, _errors.NotInStep):
    """A workflow's orchestration code scheduled outside a step."""

    code = "not-in-step"
    kind = "not-in-step"


def _error(e):
    value = e.value
    if isinstance(value, _wit.ScheduleError_Full):
        return Full(value.value)
    if isinstance(value, _wit.ScheduleError_NotInStep):
        return NotInStep(value.value)
    if isinstance(value, _wit.ScheduleError_NotAllowed):
        return NotAllowed(value.value)
    return Invalid(value.value)


@dataclass
class Scheduled:
    """A pending schedule."""

    id: int
    action: str
    args: list
    """The action's arguments, decoded."""
    at: int
    """When it is due (next), in milliseconds since the Unix epoch."""
    every_ms: int | None
    """For a recurring schedule, its interval in milliseconds."""


def encode_args(args):
    try:
        return _types.dumps(list(args))
    except (TypeError, ValueError) as e:
        raise _errors.Error("json", f"the arguments cannot be encoded as JSON: {e}") from None


def _call(fn, *params):
    try:
        return fn(*params)
    except Err as e:
        raise _error(e) from None


def after(delay_ms, action, *args):
    """Runs `action(*args)` `delay_ms` milliseconds from now; returns the
    schedule's id."""
    return _call(_wit.after, delay_ms, action, encode_args(args))


def at(at_ms, action, *args):
    """Runs `action(*args)` at `at_ms` (milliseconds since the Unix epoch;
    a time in the past runs as soon as possible)."""
    return _call(_wit.at, at_ms, action, encode_args(args))


def every(interval_ms, action, *args):
    """Runs `action(*args)` every `interval_ms` milliseconds (at least 100),
    the first time one interval from now, until cancelled; returns the
    schedule's id."""
    return _call(_wit.every, interval_ms, action, encode_args(args))


def pending():
    """The pending schedules, soonest first."""
    return [
        Scheduled(s.id, s.action, _types.loads(s.args), s.at, s.every_ms)
        for s in _call(_wit.pending)
    ]


def cancel(id):
    """Cancels schedule `id`; returns whether it was pending."""
    return _call(_wit.cancel, id)
