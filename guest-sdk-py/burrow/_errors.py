"""The exception classes every module shares."""


class Error(Exception):
    """An application error: a machine-readable code and a message for people.

    Raising it from an action rolls back everything the action wrote; the
    caller sees the code and the message (HTTP status 422). In a workflow
    step, `critical=True` fails the step for good without retries, and
    `rollback=True` fails it for good and rolls the workflow back to its
    last checkpoint.
    """

    code = "error"

    def __init__(self, code=None, message="", *, critical=False, rollback=False):
        if code is not None:
            self.code = code
        self.message = message
        self.critical = critical
        self.rollback = rollback
        super().__init__(self.code, message)

    def __str__(self):
        return f"{self.code}: {self.message}"

    def __repr__(self):
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"

    def failure_message(self):
        """The message the caller gets."""
        return self.message


class NotInStep(Error):
    """A workflow's orchestration code made a side effect outside a step.

    Every capability raises its own subclass (`db.NotInStep`,
    `state.NotInStep`, ...), so `except burrow.NotInStep` catches them all.
    The message is the host's, naming the call.
    """

    code = "not-in-step"

    def __init__(self, message=""):
        Error.__init__(self, None, message)


class NotAllowed(Error):
    """The call is not allowed where it was made (the message says why)."""

    code = "not-allowed"

    def __init__(self, message=""):
        Error.__init__(self, None, message)


class InvalidArguments(Error):
    """Action arguments that do not fit the action: the wrong count, a value
    of the wrong type, or JSON that is no array."""

    code = "invalid-arguments"

    def __init__(self, message=""):
        Error.__init__(self, None, message)
