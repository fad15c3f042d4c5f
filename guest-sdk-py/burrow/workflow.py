"""Durable workflows: replay-safe steps, durable sleeps, recorded time,
loops that prune their history, joins and races, queue waits, and rollback
handlers.

A workflow actor gives `burrow.actor` a `workflow=run` function, where
`run(ctx, input)` takes a `Ctx` and the create input (decoded by its type
hint). The host runs it when the instance is created and again after every
wait, wake and restart, each time from the start: a step that finished
returns its recorded output without running again, so only orchestration
code re-runs, and it must be deterministic (take time from `ctx.now()`).

Side effects (`db`, `state`, `queue.append`, schedules, calls, broadcasts,
HTTP requests) work only inside a step; outside, the host refuses them with
`burrow.NotInStep`. A step's writes and its history entry commit together,
so they happen once.

    def run(ctx, order: Order):
        charge = ctx.try_step("charge-card", lambda: charge_card(order), retries=3)

        @ctx.step("store-result")
        def status():
            status = "paid" if charge.ok else "manual-review"
            state.set({"status": status})
            return status

        return status

A step's output (and a loop's state) is what its JSON encoding decodes to,
on the first run as on every replay: a tuple comes back as a list, a
dataclass as a dict.

Durations are seconds (an int or a float) or a `datetime.timedelta`;
times (`now`, `sleep_until`) are milliseconds since the Unix epoch.
"""

import datetime
from dataclasses import dataclass

from . import _errors, _types
from ._wit import Err
from ._wit import types as _wit_types
from ._wit import workflow as _wit
from ._wit import workflow_runner as _runner
from .queue import Event


class Interrupt(BaseException):
    """The run cannot go on from here. Not an `Exception`, so that
    `except Exception` in orchestration code does not swallow it: let it
    propagate out of `run`."""


class Suspend(Interrupt):
    """The run waits (a sleep, a retry's backoff, a queue wait); the host
    runs it again when the wait is over."""


class Diverged(Interrupt):
    """The code no longer matches the recorded history."""


class Invalid(Interrupt):
    """A workflow call was made where it is not allowed (a step inside a
    step, a workflow call outside a workflow run)."""


@dataclass
class StepFailure:
    """A step's terminal failure."""

    kind: str
    """`critical`, `timeout`, `exhausted` or `rollback`."""
    code: str
    """The last error's code (`timeout` or `trapped` for those)."""
    message: str
    attempts: int

    def __str__(self):
        return f"{self.kind} after {self.attempts} attempt(s): {self.code}: {self.message}"

    def to_dict(self):
        return {"kind": self.kind, "code": self.code, "message": self.message, "attempts": self.attempts}

    @classmethod
    def _from_wit(cls, f):
        return cls(f.kind.name.lower(), f.code, f.message, f.attempts)


class StepFailed(_errors.Error):
    """Raised by `Ctx.step` (and joins and races) when a step failed for
    good; `failure` says how. Uncaught, it fails the workflow (after the
    rollback handlers ran). `try_step` and `try_block` return it as data."""

    def __init__(self, failure):
        _errors.Error.__init__(self, failure.code, failure.message)
        self.failure = failure

    def failure_message(self):
        return f"step failed for good: {self.failure}"


class Outcome:
    """What `try_step` and `try_block` return: `ok` and `value`, or the
    `failure`."""

    __slots__ = ("value", "failure")

    def __init__(self, value=None, failure=None):
        self.value = value
        self.failure = failure

    @property
    def ok(self):
        return self.failure is None

    def to_dict(self):
        """`{"ok": value}` or `{"failed": {kind, code, message, attempts}}`."""
        return {"ok": self.value} if self.ok else {"failed": self.failure.to_dict()}

    def __repr__(self):
        return f"Outcome(ok={self.value!r})" if self.ok else f"Outcome(failed={self.failure!r})"


class Continue:
    """From a loop's body: run the next iteration with `state`."""

    __slots__ = ("state",)

    def __init__(self, state):
        self.state = state


class Break:
    """From a loop's body: end the loop with `output`."""

    __slots__ = ("output",)

    def __init__(self, output=None):
        self.output = output


def _ms(duration, what):
    if isinstance(duration, datetime.timedelta):
        seconds = duration.total_seconds()
    elif isinstance(duration, (int, float)) and not isinstance(duration, bool):
        seconds = duration
    else:
        raise TypeError(f"{what} is seconds (a number) or a datetime.timedelta, not {duration!r}")
    if seconds < 0:
        raise ValueError(f"{what} is negative: {duration!r}")
    return round(seconds * 1000)


@dataclass
class StepOptions:
    """How a step retries and how long an attempt may run."""

    retries: int = 3
    """Attempts after the first."""
    backoff: tuple = (1.0, 60.0)
    """The wait before the first retry and the longest wait (it doubles
    with each retry), as durations."""
    timeout: object = None
    """How long one attempt may run; None for the actor's call timeout."""

    def _to_wit(self):
        base, cap = self.backoff
        timeout = None if self.timeout is None else _ms(self.timeout, "a step's timeout")
        return _wit.StepOptions(self.retries, _ms(base, "a step's backoff"), _ms(cap, "a step's backoff cap"), timeout)


_attempt = 0


def attempt():
    """Inside a step's body: which attempt this is (1 for the first).
    Outside a step: 0."""
    return _attempt


def step_key():
    """The open step's idempotency key: the same in every attempt of the
    step, in every run and after every restart, different for every other
    step (and for another instance, or one created anew under the same
    key). Send it with the step's requests (`Idempotency-Key`, see
    `burrow.http`) so that a server that honours it applies a retried
    attempt once. None outside a step."""
    return _wit.step_key()


def _interrupt(e):
    value = e.value
    if isinstance(value, _wit.Interrupt_Suspend):
        return Suspend()
    if isinstance(value, _wit.Interrupt_Diverged):
        return Diverged(value.value)
    return Invalid(value.value)


def _host(fn, *args):
    try:
        return fn(*args)
    except Err as e:
        raise _interrupt(e) from None


def _failure(e):
    if isinstance(e, _errors.Error):
        return _wit_types.Failure(e.code, e.failure_message())
    return _wit_types.Failure("exception", f"{type(e).__name__}: {e}")


class Ctx:
    """The orchestration context of one run."""

    def __init__(self):
        # Rollback handlers of the steps completed since the last checkpoint.
        self._undo = []

    def _options(self, options, retries, backoff, timeout):
        base = options or StepOptions()
        return StepOptions(
            base.retries if retries is None else retries,
            base.backoff if backoff is None else backoff,
            base.timeout if timeout is None else timeout,
        )

    def step(self, name, fn=None, options=None, *, retries=None, backoff=None, timeout=None):
        """Runs `fn()` as the step `name` and returns its output; on replay,
        returns the recorded output without running it. A terminal failure
        raises `StepFailed`. Without `fn`, a decorator: `@ctx.step("name")`
        runs the function it decorates and binds its name to the output."""
        if fn is None:
            return lambda fn: self.step(name, fn, options, retries=retries, backoff=backoff, timeout=timeout)
        outcome = self.try_step(name, fn, options, retries=retries, backoff=backoff, timeout=timeout)
        if not outcome.ok:
            raise StepFailed(outcome.failure)
        return outcome.value

    def try_step(self, name, fn=None, options=None, *, retries=None, backoff=None, timeout=None):
        """Like `step`, but a terminal failure comes back as data: an
        `Outcome`. What a failed attempt wrote is rolled back; what earlier
        steps wrote stays."""
        if fn is None:
            return lambda fn: self.try_step(name, fn, options, retries=retries, backoff=backoff, timeout=timeout)
        opts = self._options(options, retries, backoff, timeout)._to_wit()
        start = _host(_wit.begin_step, name, opts)
        if isinstance(start, _wit.StepStart_Done):
            return Outcome(_types.loads(start.value))
        if isinstance(start, _wit.StepStart_Failed):
            return Outcome(failure=StepFailure._from_wit(start.value))
        global _attempt
        _attempt = start.value
        value = None
        try:
            result = fn()
            try:
                text = _types.dumps(result)
                value = _types.loads(text)
                outcome = _wit.StepOutcome_Ok(text)
            except (TypeError, ValueError) as e:
                failure = _wit_types.Failure("json", f"the output could not be encoded as JSON: {e}")
                outcome = _wit.StepOutcome_Critical(failure)
        except _errors.Error as e:
            if e.rollback:
                outcome = _wit.StepOutcome_Rollback(_failure(e))
            elif e.critical:
                outcome = _wit.StepOutcome_Critical(_failure(e))
            else:
                outcome = _wit.StepOutcome_Error(_failure(e))
        except Interrupt as e:
            # A workflow call inside a step (a nested step): the host refused
            # it; the step fails for good.
            message = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            outcome = _wit.StepOutcome_Critical(_wit_types.Failure("invalid", message))
        except Exception as e:
            outcome = _wit.StepOutcome_Error(_failure(e))
        finally:
            _attempt = 0
        failure = _host(_wit.end_step, outcome)
        if failure is not None:
            return Outcome(failure=StepFailure._from_wit(failure))
        if not isinstance(outcome, _wit.StepOutcome_Ok):
            raise Invalid("the host committed a step that failed")
        return Outcome(value)

    def try_block(self, fn, catch_rollback=False):
        """Runs `fn(ctx)`; a terminal failure of a step, join or race inside
        it comes back as data (an `Outcome`), except a rollback unless
        `catch_rollback`. What the block's steps wrote before the failure
        stays: catching a failure does not undo it."""
        try:
            return Outcome(fn(self))
        except StepFailed as e:
            if e.failure.kind == "rollback" and not catch_rollback:
                raise
            return Outcome(failure=e.failure)

    def step_with_rollback(self, name, fn, undo, options=None, *, retries=None, backoff=None, timeout=None):
        """Like `step`, and registers `undo(output)`: if the workflow later
        fails for good, the handlers of the steps completed since the last
        `rollback_checkpoint` run in reverse order, each as the step
        `rollback <name>` (durably: a crash during the rollback resumes it)."""
        value = self.step(name, fn, options, retries=retries, backoff=backoff, timeout=timeout)
        self._undo.append((name, lambda: undo(value)))
        return value

    def rollback_checkpoint(self, name):
        """Marks where a rollback stops: handlers of earlier steps do not run."""
        self._undo.clear()

    def _roll_back(self):
        while self._undo:
            name, undo = self._undo.pop()
            step = f"rollback {name}"
            outcome = self.try_step(step, undo)
            if not outcome.ok:
                failure = outcome.failure
                raise StepFailed(StepFailure("rollback", failure.code, f"{step}: {failure.message}", failure.attempts))

    def repeat(self, name, state, body):
        """Runs the loop `name`: `body(ctx, state)` returns `Continue(next)`
        or `Break(output)`. Each iteration's positions are its own and its
        history is pruned when it ends, so a long loop keeps a short
        history; a replay starts at the current iteration with the state
        carried into it. Returns the output."""
        start = _host(_wit.loop_enter, name, self._json(state, "the loop's state"))
        if isinstance(start, _wit.LoopStart_Done):
            return _types.loads(start.value)
        state = _types.loads(start.value.state)
        while True:
            try:
                step = body(self, state)
                if isinstance(step, Continue):
                    text = self._json(step.state, "the loop's state")
                elif isinstance(step, Break):
                    text = self._json(step.output, "the loop's output")
                else:
                    raise TypeError(f"loop `{name}`: the body returned {step!r}, not Continue(...) or Break(...)")
            except Interrupt:
                raise
            except Exception:
                _host(_wit.loop_leave)
                raise
            if isinstance(step, Break):
                _host(_wit.loop_break, text)
                return _types.loads(text)
            _host(_wit.loop_continue, text)
            state = _types.loads(text)

    @staticmethod
    def _json(value, what):
        try:
            return _types.dumps(value)
        except (TypeError, ValueError) as e:
            raise _errors.Error("json", f"{what} cannot be encoded as JSON: {e}") from None

    def join(self, name, branches):
        """Runs every branch (`fn(ctx)`) and returns their outputs in order.
        A branch that waits does not hold the others back: the run waits
        for the earliest, and later runs replay the branches that finished."""
        _host(_wit.join_enter, name, False)
        outcomes = []
        for index, branch in enumerate(branches):
            _host(_wit.branch, index)
            try:
                outcomes.append((True, branch(self)))
            except (Interrupt, Exception) as e:
                outcomes.append((False, e))
        _host(_wit.join_exit, None)
        values = []
        waiting = False
        for ok, value in outcomes:
            if ok:
                values.append(value)
            elif isinstance(value, Suspend):
                waiting = True
            else:
                raise value
        if waiting:
            raise Suspend()
        return values

    def race(self, name, branches):
        """Runs the branches until one finishes (completes or fails for
        good); returns `(index, output)`. The others are cancelled: their
        waits are dropped and they do not run again. The winner is
        recorded, so replay takes the same path."""
        recorded = _host(_wit.join_enter, name, True)
        order = [recorded] if recorded is not None else range(len(branches))
        for index in order:
            if index >= len(branches):
                _host(_wit.join_exit, None)
                raise Diverged(
                    f"race `{name}` recorded branch {index} as its winner, and the code has no such branch"
                )
            _host(_wit.branch, index)
            try:
                value = branches[index](self)
            except Suspend:
                continue
            except (Diverged, Invalid):
                _host(_wit.join_exit, None)
                raise
            except Exception:
                _host(_wit.join_exit, index)
                raise
            _host(_wit.join_exit, index)
            return index, value
        _host(_wit.join_exit, None)
        raise Suspend()

    def next_event(self, name, types=(), timeout=None):
        """Takes the next event of the instance's queue whose type is one of
        `types` (any when empty). The event leaves the queue in the
        transaction that records it here, so a crash loses nothing and
        replay gets the same event. Without an event the run waits; after
        `timeout` it gets None."""
        events = self.next_batch(name, types, 1, timeout)
        return events[0] if events else None

    def next_batch(self, name, types=(), count=100, timeout=None):
        """Like `next_event`, taking up to `count` events at once (those
        pending when the run gets here; at least one unless the timeout
        passed)."""
        if isinstance(types, str):
            types = [types]
        timeout_ms = None if timeout is None else _ms(timeout, "a queue wait's timeout")
        events = _host(_wit.queue_next, name, list(types), count, timeout_ms)
        return [Event._from_wit(e) for e in events]

    def version(self, name, latest):
        """For evolving code: the version at this position. A run that gets
        here first records `latest`; a run whose history predates it gets 0."""
        return _host(_wit.version, name, latest)

    def removed(self, name):
        """For evolving code: stands in for a step `name` that the code no
        longer has, so that runs which recorded it do not diverge."""
        _host(_wit.removed, name)

    def sleep(self, name, duration):
        """Sleeps durably: the wake-up time is recorded the first time the
        run gets here; the instance may sleep, be evicted or restart
        meanwhile."""
        _host(_wit.sleep, name, _ms(duration, "a sleep"))

    def sleep_until(self, name, at_ms):
        """Sleeps durably until `at_ms`, milliseconds since the Unix epoch."""
        _host(_wit.sleep_until, name, at_ms)

    def now(self):
        """The time (ms since the Unix epoch), recorded the first time the
        run gets here and the same on every replay."""
        return _host(_wit.now)


def _run(fn, input_text):
    """The `workflow-runner.run` export: one run of `fn(ctx, input)`."""
    try:
        value = _types.decode_input(input_text, _types.hint_of(fn, 1), "the workflow's input")
    except _types.InvalidArgs as e:
        return _runner.RunOutcome_Failed(_wit_types.Failure("invalid-input", str(e)))
    ctx = Ctx()
    try:
        try:
            output = fn(ctx, value)
        except Exception as failure:
            try:
                ctx._roll_back()
            except StepFailed as rollback_failure:
                raise rollback_failure from None
            raise failure from None
    except (Suspend, Diverged):
        return _runner.RunOutcome_Interrupted()
    except Invalid as e:
        return _runner.RunOutcome_Failed(_wit_types.Failure("invalid", str(e)))
    except Exception as e:
        return _runner.RunOutcome_Failed(_failure(e))
    try:
        return _runner.RunOutcome_Completed(_types.dumps(output))
    except (TypeError, ValueError) as e:
        return _runner.RunOutcome_Failed(
            _wit_types.Failure("json", f"the output could not be encoded as JSON: {e}")
        )
