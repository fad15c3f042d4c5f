"""Logging into the host's log, tagged with the actor's name and key.

    log.info(f"sending welcome email to {email}")
"""

from ._wit import log as _wit

LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level, message):
    """Logs `message` (any object, as `str`) at `level`: one of `LEVELS`."""
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    _wit.log(getattr(_wit.Level, level.upper()), str(message))


def trace(message):
    log("trace", message)


def debug(message):
    log("debug", message)


def info(message):
    log("info", message)


def warn(message):
    log("warn", message)


def error(message):
    log("error", message)
