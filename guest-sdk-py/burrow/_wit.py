"""The componentize-py bindings of `wit/http.wit` (world
`full-actor-http-server`: `full-actor` of `wit/actor.wit`,
`wasi:http/outgoing-handler`, and the export
`wasi:http/incoming-handler`).

componentize-py generates the `wit_world` package while it builds a
component, so the bindings exist only inside one. Outside (unit tests of
the pure logic, the build helper) `AVAILABLE` is False and calling into the
host raises RuntimeError.

Beside `wasi:http/types`, Burrow's `types` interface is named
`burrow_actor_types`; a component built for the world `full-actor` (with
`--world`) has it as `types`, and no `wasi:http` (`HTTP_AVAILABLE`).
"""

try:
    from componentize_py_types import Err, Ok
    from wit_world.exports import access, processor, workflow_runner
    from wit_world.imports import actors, caller, db, events, log, queue, schedule, state, workflow

    try:
        from wit_world.imports import burrow_actor_types as types
    except ImportError:
        from wit_world.imports import types

    AVAILABLE = True
except ImportError:  # pragma: no cover - outside a component
    AVAILABLE = False

    class Err(Exception):
        """Stands in for componentize-py's `Err` outside a component."""

        def __init__(self, value):
            super().__init__(value)
            self.value = value

    class Ok:
        """Stands in for componentize-py's `Ok` outside a component."""

        def __init__(self, value):
            self.value = value

    class _Missing:
        def __init__(self, name):
            self._name = name

        def __getattr__(self, attr):
            raise RuntimeError(
                f"burrow: `{self._name}.{attr}` needs the host; it works only inside a "
                "component built with componentize-py (see guest-sdk-py/README.md)"
            )

    access = _Missing("access")
    actors = _Missing("actors")
    caller = _Missing("caller")
    db = _Missing("db")
    events = _Missing("events")
    log = _Missing("log")
    queue = _Missing("queue")
    schedule = _Missing("schedule")
    state = _Missing("state")
    types = _Missing("types")
    workflow = _Missing("workflow")
    processor = _Missing("processor")
    workflow_runner = _Missing("workflow_runner")

try:
    from wit_world.imports import outgoing_handler, streams
    from wit_world.imports import wasi_http_types as http_types

    HTTP_AVAILABLE = True
except ImportError:  # pragma: no cover - outside a component, or built without wasi:http
    HTTP_AVAILABLE = False
    outgoing_handler = None
    streams = None
    http_types = None
