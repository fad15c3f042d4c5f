"""The component's exports (world `burrow:actor/full-actor`), dispatching to
what the actor declared with `burrow.actor` and `@burrow.action`.

componentize-py looks for these classes in the component's entry module;
`python -m burrow.build` writes one that imports the actor's module and
then these (see guest-sdk-py/README.md).
"""

import traceback

from . import _types, log, workflow
from ._actor import REGISTRY
from ._errors import Error
from ._wit import AVAILABLE, Err, access, types, workflow_runner
from .queue import Event

if AVAILABLE:
    from wit_world import exports as _exports

    _Guest, _Processor, _WorkflowRunner, _Connections, _Access = (
        _exports.Guest,
        _exports.Processor,
        _exports.WorkflowRunner,
        _exports.Connections,
        _exports.Access,
    )
    # Only in a component built for `full-actor-http-server`.
    _IncomingHandler = getattr(_exports, "IncomingHandler", object)
else:  # pragma: no cover - outside a component
    _Guest = _Processor = _WorkflowRunner = _Connections = _Access = _IncomingHandler = object


def _failure(e, during):
    """The failure a caller sees for an exception out of guest code."""
    if isinstance(e, Error):
        return types.Failure(e.code, e.failure_message())
    if isinstance(e, workflow.Interrupt):
        return types.Failure("invalid", str(e) or type(e).__name__)
    # An exception the code did not mean to raise: a bug. The call fails
    # (and rolls back) like one that raised burrow.Error; the traceback
    # goes to the host's log.
    try:
        log.error(f"{during} raised {type(e).__name__}: {''.join(traceback.format_exception(e))}")
    except Exception:
        pass
    return types.Failure("exception", f"{type(e).__name__}: {e}")


def _hook(name, *args):
    fn = REGISTRY.hooks.get(name)
    if fn is None:
        return
    try:
        fn(*args)
    except (Exception, workflow.Interrupt) as e:
        raise Err(_failure(e, f"hook {name}")) from None


def _decode_input(fn, index, text, what, code):
    try:
        return _types.decode_input(text, _types.hint_of(fn, index), what)
    except _types.InvalidArgs as e:
        raise Err(types.Failure(code, str(e))) from None


class Guest(_Guest):
    def migrate(self):
        _hook("migrate")

    def create(self, input):
        fn = REGISTRY.hooks.get("create")
        if fn is not None:
            _hook("create", _decode_input(fn, 0, input, "the create input", "invalid-input"))

    def wake(self):
        _hook("wake")

    def sleep(self):
        _hook("sleep")

    def destroy(self):
        _hook("destroy")

    def action(self, name, args):
        # The same order of checks as the Rust SDK: the JSON array, the
        # name, the arguments.
        try:
            values = _types.parse_args(args)
        except _types.InvalidArgs as e:
            raise Err(types.ActionError_InvalidArguments(str(e))) from None
        entry = REGISTRY.actions.get(name)
        if entry is None:
            raise Err(types.ActionError_UnknownAction(name))
        fn, signature = entry
        try:
            values = signature.decode(values)
        except _types.InvalidArgs as e:
            raise Err(types.ActionError_InvalidArguments(str(e))) from None
        try:
            result = fn(*values)
        except (Exception, workflow.Interrupt) as e:
            raise Err(types.ActionError_Failed(_failure(e, f"action {name}"))) from None
        try:
            return _types.dumps(result)
        except (TypeError, ValueError) as e:
            failure = types.Failure("json", f"the result could not be encoded as JSON: {e}")
            raise Err(types.ActionError_Failed(failure)) from None


class Processor(_Processor):
    def policy(self):
        policy = REGISTRY.policy
        if policy is None:
            return None
        if callable(policy):
            policy = policy()
        return policy._to_wit()

    def process(self, event):
        if REGISTRY.process is None:
            raise Err(types.Failure("no-queue", "this actor has no queue"))
        try:
            result = REGISTRY.process(Event._from_wit(event))
        except (Exception, workflow.Interrupt) as e:
            raise Err(_failure(e, f"process of event {event.id}")) from None
        try:
            return _types.dumps(result)
        except (TypeError, ValueError) as e:
            raise Err(types.Failure("json", f"the result could not be encoded as JSON: {e}")) from None

    def select(self, pending):
        if REGISTRY.select is None:
            return [pending[0].id] if pending else []
        chosen = REGISTRY.select([Event._from_wit(e) for e in pending])
        return [int(i) for i in chosen]


class WorkflowRunner(_WorkflowRunner):
    def has_workflow(self):
        return REGISTRY.workflow is not None

    def run(self, input):
        if REGISTRY.workflow is None:
            return workflow_runner.RunOutcome_Failed(types.Failure("no-workflow", "this actor has no workflow"))
        return workflow._run(REGISTRY.workflow, input)


class Connections(_Connections):
    def on_connect(self, id, params):
        fn = REGISTRY.connect
        if fn is None:
            return
        value = _decode_input(fn, 1, params, "the connection parameters", "invalid-params")
        try:
            fn(id, value)
        except (Exception, workflow.Interrupt) as e:
            raise Err(_failure(e, "the connect hook")) from None

    def on_disconnect(self, id):
        fn = REGISTRY.disconnect
        if fn is None:
            return
        try:
            fn(id)
        except (Exception, workflow.Interrupt) as e:
            raise Err(_failure(e, "the disconnect hook")) from None


class Access(_Access):
    def internal(self):
        names, from_actors = REGISTRY.internal_actions()
        return access.InternalActions(names=names, from_actors=from_actors)


__all__ = ["Guest", "Processor", "WorkflowRunner", "Connections", "Access"]


class IncomingHandler(_IncomingHandler):
    """`wasi:http/incoming-handler`: a request to
    `/actors/{actor}/{key}/http/...`, for the actor's `@http.handler`."""

    def handle(self, request, response_out):
        from . import http

        http._serve(request, response_out)
