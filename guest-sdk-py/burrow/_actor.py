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
        self.declared = False

    def add_action(self, fn, name=None):
        if not callable(fn):
            raise TypeError(f"an action must be a function, not {fn!r}")
        name = name or fn.__name__
        if not name or name == "<lambda>":
            raise TypeError("an action needs a name: register a lambda with @burrow.action(name=...)")
        if name in self.actions:
            raise ValueError(f"the action `{name}` is declared twice")
        self.actions[name] = (fn, _types.Signature(fn, name))

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


def _callable(value, what):
    if not callable(value):
        raise TypeError(f"`{what}` must be a function, not {value!r}")
    return value


REGISTRY = Registry()


def action(fn=None, *, name=None):
    """Registers `fn` as an action, named like the function (or `name`).

        @burrow.action
        def increment(amount: int) -> int: ...

    Arguments arrive as a JSON array and are checked against the type hints
    (int, float, str, bool, None, list[...], tuple[...], dict[str, ...],
    Optional/Union, Literal, enums and dataclasses; no hint takes any
    JSON): a wrong count or type is refused with `invalid-arguments`,
    naming the argument. The result is encoded as JSON.
    """
    if fn is None or isinstance(fn, str):
        if isinstance(fn, str):
            name = fn
        return lambda f: action(f, name=name)
    REGISTRY.add_action(fn, name)
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
    to those registered with `@burrow.action`.
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
    )


__all__ = ["Error", "REGISTRY", "action", "actor"]
