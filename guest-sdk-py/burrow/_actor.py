"""The actor's declaration: its actions, hooks, queue, workflow and
connection hooks, kept in one registry that the exports dispatch to."""

from . import _types
from ._errors import Error

HOOKS = ("migrate", "create", "wake", "sleep", "destroy")


class Registry:
    def __init__(self):
        self.actions = {}
        self.hooks = {}
        self.policy = None
        self.process = None
        self.select = None
        self.workflow = None
        self.connect = None
        self.disconnect = None
        self.internal = set()
        self.internal_from_actors = True
        self.declared = False

    def add_action(self, fn, name=None, internal=False):
        if not callable(fn):
            raise TypeError(f"an action must be a function, not {fn!r}")
        name = name or fn.__name__
        if not name or name == "<lambda>":
            raise TypeError("an action needs a name: register a lambda with @burrow.action(name=...)")
        if name in self.actions:
            raise ValueError(f"the action `{name}` is declared twice")
        self.actions[name] = (fn, _types.Signature(fn, name))
        if internal:
            self.internal.add(name)

    def internal_actions(self):
        """The internal actions' names, sorted, and whether other actors
        may call them (the `access` export's answer)."""
        return sorted(self.internal), self.internal_from_actors

    def declare(self, **parts):
        if self.declared:
            raise ValueError("burrow.actor(...) is called twice; declare the actor once")
        self.declared = True
        for hook in HOOKS:
            if parts.get(hook) is not None:
                self.hooks[hook] = _callable(parts[hook], hook)
        for part in ("process", "select", "workflow", "connect", "disconnect"):
            if parts.get(part) is not None:
                setattr(self, part, _callable(parts[part], part))
        policy = parts.get("policy")
        if (policy is None) != (self.process is None):
            raise ValueError("an actor with a queue needs both `policy` and `process`")
        self.policy = policy
        if self.select is not None and self.process is None:
            raise ValueError("`select` is for an actor with a queue (`policy` and `process`)")
        for action in parts.get("actions") or ():
            self.add_action(action)
        for action in parts.get("internal") or ():
            name = action if isinstance(action, str) else getattr(action, "__name__", None)
            if name not in self.actions or (not isinstance(action, str) and self.actions[name][0] is not action):
                raise ValueError(f"`internal` names {action!r}, which is not one of the actor's actions")
            self.internal.add(name)
        from_actors = parts.get("internal_from_actors", True)
        if not isinstance(from_actors, bool):
            raise TypeError(f"`internal_from_actors` must be True or False, not {from_actors!r}")
        self.internal_from_actors = from_actors


def _callable(value, what):
    if not callable(value):
        raise TypeError(f"`{what}` must be a function, not {value!r}")
    return value


REGISTRY = Registry()


def action(fn=None, *, name=None, internal=False):
    """Registers `fn` as an action, named like the function (or `name`).

        @burrow.action
        def increment(amount: int) -> int: ...

        @burrow.action(internal=True)
        def fire(text: str): ...

    An internal action may not be called by clients: the host answers them
    as for an action the actor does not have (`unknown-action`), before the
    actor's code runs. The instance's schedules and the actor's own code
    may call it, and other actors unless `burrow.actor(...,
    internal_from_actors=False)`.

    Arguments arrive as a JSON array and are checked against the type hints
    (int, float, str, bool, None, list[...], tuple[...], dict[str, ...],
    Optional/Union, Literal, enums and dataclasses; no hint takes any
    JSON): a wrong count or type is refused with `invalid-arguments`,
    naming the argument. The result is encoded as JSON.
    """
    if fn is None or isinstance(fn, str):
        if isinstance(fn, str):
            name = fn
        return lambda f: action(f, name=name, internal=internal)
    REGISTRY.add_action(fn, name, internal)
    return fn


def actor(
    *,
    migrate=None,
    create=None,
    wake=None,
    sleep=None,
    destroy=None,
    policy=None,
    process=None,
    select=None,
    workflow=None,
    connect=None,
    disconnect=None,
    actions=(),
    internal=(),
    internal_from_actors=True,
):
    """Declares the actor, like Rust's `actor!`:

        burrow.actor(migrate=migrate, actions=[increment, get])

    Hooks are optional: `migrate()` runs at every start, `create(input)`
    once with the creator's input (decoded by its type hint), then
    `wake()`; `sleep()` and `destroy()` before those. A queue needs
    `policy` (a `queue.Policy`, or a function returning one, called when an
    instance is created, after its hooks) and `process(event)`; `select(events)`
    picks events for `Policy.custom()`. A workflow actor gives
    `workflow=run` (see `burrow.workflow`). `connect(id, params)` may refuse
    a client by raising; `disconnect(id)` hears that it left. `actions` adds
    to those registered with `@burrow.action`. `internal` lists actions
    (functions or names) that clients may not call, like
    `@burrow.action(internal=True)`; `internal_from_actors=False` keeps
    them from other actors too (the actor's own code and its schedules
    always may call them). `burrow.caller()` tells an action who called.
    """
    REGISTRY.declare(
        migrate=migrate,
        create=create,
        wake=wake,
        sleep=sleep,
        destroy=destroy,
        policy=policy,
        process=process,
        select=select,
        workflow=workflow,
        connect=connect,
        disconnect=disconnect,
        actions=actions,
        internal=internal,
        internal_from_actors=internal_from_actors,
    )


__all__ = ["Error", "REGISTRY", "action", "actor"]
