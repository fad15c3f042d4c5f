"""Who made the current call: `burrow.caller()`."""

import dataclasses

from . import _wit

KINDS = ("client", "actor", "schedule", "host")


@dataclasses.dataclass(frozen=True)
class Identity:
    """A verified identity: the name and role (`"admin"` or `"client"`) of
    the API token a client's request carried."""

    name: str
    role: str


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who made the current call. `kind` is `"client"` (with its
    `identity`, None when the server checks no tokens), `"actor"` (guest
    code of the instance `actor`/`key`: another actor's, or another
    instance of this actor), `"schedule"` (one of this instance's
    schedules) or `"host"` (nobody: a hook other than `connect`, a queue
    event, a workflow)."""

    kind: str
    identity: Identity | None = None
    actor: str | None = None
    key: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"a caller's kind is one of {', '.join(KINDS)}, not {self.kind!r}")

    def to_json(self):
        """The caller as the host writes it in JSON: `{"client": null}`,
        `{"client": {"name": ..., "role": ...}}`, `{"actor": {"actor": ...,
        "key": ...}}`, `"schedule"` or `"host"`."""
        if self.kind == "client":
            identity = self.identity
            return {"client": None if identity is None else {"name": identity.name, "role": identity.role}}
        if self.kind == "actor":
            return {"actor": {"actor": self.actor, "key": self.key}}
        return self.kind


def caller():
    """Who made the running call: in an action, whoever called it; in the
    `connect` hook, the connecting client; everywhere else `host`."""
    value = _wit.caller.who()
    if isinstance(value, _wit.caller.Caller_Client):
        identity = value.value
        if identity is None:
            return Caller("client")
        return Caller("client", Identity(identity.name, identity.role.name.lower()))
    if isinstance(value, _wit.caller.Caller_Actor):
        return Caller("actor", actor=value.value.actor, key=value.value.key)
    if isinstance(value, _wit.caller.Caller_Schedule):
        return Caller("schedule")
    return Caller("host")
