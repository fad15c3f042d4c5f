"""Outgoing HTTP requests, through `wasi:http` (blocking: an action or a
step waits for its answer; the host meanwhile runs other instances).

    from burrow import http, workflow

    answer = http.post(
        "https://pay.example.com/charges",
        json={"amount": 1200},
        headers={"Idempotency-Key": workflow.step_key()},
    )
    if answer.ok:
        charge = answer.json()

An actor reaches only what its manifest lists
(`http = ["https://api.example.com"]`); everything else is refused before
any connection (`Denied`). In a workflow, requests are side effects: they
work inside a step and raise `NotInStep` in orchestration code. A step
that finished is never run again, so its request is not sent again; a
failed attempt may be retried, and `workflow.step_key()` gives the same key
to every attempt: send it as `Idempotency-Key`.

The actor may answer HTTP requests too: requests to
`/actors/{actor}/{key}/http/{path...}` reach the function declared with
`@http.handler`, in one transaction like an action; an exception rolls
the request back.

    @http.handler
    def webhook(request: http.Incoming) -> http.Reply:
        if request.path == "/paid":
            state.set(request.json())
            return http.Reply.json(200, {"ok": True})
        return http.Reply.text(404, "no such hook")

Every failure is an `HttpError` (code `http`, `kind` says which):
`NotInStep` (also a `burrow.NotInStep`, code `not-in-step`), `NotAllowed`
(the queue selector sends nothing; code `not-allowed`), `Denied` (the
manifest does not list the authority, its address is one the actor may not
reach, or too many requests are in flight), `Invalid` (the URL, a header or
the method), `Failed` (no connection, a timeout, a body over its limit, a
broken answer). The message is the host's text.
"""

import json as _json

import traceback as _traceback

from . import _errors, _wit
from ._wit import Err, Ok


class HttpError(_errors.Error):
    """Why a request got no answer; `kind` says which (see the module)."""

    code = "http"
    kind = "failed"

    def __init__(self, message=""):
        _errors.Error.__init__(self, None, message)


class NotInStep(HttpError, _errors.NotInStep):
    """Workflow orchestration code sent a request: requests are side
    effects, allowed only inside a step. The message is the host's."""

    code = "not-in-step"
    kind = "not-in-step"


class NotAllowed(HttpError, _errors.NotAllowed):
    """A request was sent where none may be (the queue selector)."""

    code = "not-allowed"
    kind = "not-allowed"


class Denied(HttpError):
    """The host refused the request: the manifest does not list its
    authority, its name resolves to an address the actor may not reach, or
    too many requests are in flight. The message names the actor and the
    authority."""

    kind = "denied"


class Invalid(HttpError):
    """The URL, a header or the method is not valid."""

    kind = "invalid"


class Failed(HttpError):
    """The request failed on the way: no connection, a timeout, a body over
    its limit, a broken answer (`wasi:http`'s error code)."""

    kind = "failed"


# The host's own refusals come as `error-code.internal-error` whose text
# starts with what was refused.
_PREFIXES = (
    ("not-in-step: ", NotInStep, True),
    ("not-allowed: ", NotAllowed, True),
    ("denied: ", Denied, False),
    ("limit: ", Denied, False),
)


def _describe(code):
    """A `wasi:http` error code as text: its case and its payload."""
    name = type(code).__name__
    name = name.split("_", 1)[1] if name.startswith("ErrorCode_") else name
    value = getattr(code, "value", None)
    if value is None and hasattr(code, "__dataclass_fields__"):
        fields = {k: getattr(code, k) for k in code.__dataclass_fields__}
        value = fields or None
    return name if value is None else f"{name}({value!r})"


def _error_of(code):
    """The exception for a `wasi:http` error code."""
    if type(code).__name__ == "ErrorCode_InternalError" and isinstance(code.value, str):
        for prefix, cls, strip in _PREFIXES:
            if code.value.startswith(prefix):
                return cls(code.value[len(prefix):] if strip else code.value)
    return Failed(f"failed: {_describe(code)}")


def _split_url(url):
    """(scheme, authority, path with query) of an http:// or https:// URL."""
    if not isinstance(url, str):
        raise Invalid(f"invalid: the URL must be a string, not {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise Invalid(f"invalid: `{url}` is not an http:// or https:// URL")
    cut = min([i for i in (rest.find("/"), rest.find("?")) if i >= 0], default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if not authority:
        raise Invalid(f"invalid: `{url}` is not an http:// or https:// URL")
    # The fragment is the client's, never sent.
    path = path.split("#", 1)[0]
    if not path:
        path = "/"
    elif path.startswith("?"):
        path = "/" + path
    return scheme.lower(), authority, path


def _header_entries(headers):
    """The headers as (lowercase name, bytes) pairs: a dict or a list of
    pairs, each value a string or bytes."""
    if headers is None:
        return []
    items = headers.items() if hasattr(headers, "items") else headers
    entries = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise Invalid(f"invalid: headers are a dict or a list of (name, value) pairs, not {item!r}") from None
        if not isinstance(name, str):
            raise Invalid(f"invalid: a header's name must be a string, not {name!r}")
        if isinstance(value, str):
            value = value.encode()
        elif not isinstance(value, (bytes, bytearray)):
            raise Invalid(f"invalid: header `{name}` must be a string or bytes, not {type(value).__name__}")
        entries.append((name.lower(), bytes(value)))
    return entries


_NO_JSON = object()


def _prepare(method, url, headers, body, json, timeout_ms):
    """Everything of a request that needs no host: checked and encoded."""
    if not isinstance(method, str) or not method:
        raise Invalid(f"invalid: the method must be a non-empty string, not {method!r}")
    scheme, authority, path = _split_url(url)
    entries = _header_entries(headers)
    if json is not _NO_JSON:
        if body is not None:
            raise Invalid("invalid: give a request `body` or `json`, not both")
        body = _json.dumps(json, separators=(",", ":")).encode()
        if not any(name == "content-type" for name, _ in entries):
            entries.append(("content-type", b"application/json"))
    if body is None:
        body = b""
    elif isinstance(body, str):
        body = body.encode()
    elif isinstance(body, (bytes, bytearray, memoryview)):
        body = bytes(body)
    else:
        raise Invalid(f"invalid: the body must be bytes or a string, not {type(body).__name__}")
    # A body of known length is sent with it, so the server (and the host's
    # limit) knows its size before reading it.
    if body and not any(name == "content-length" for name, _ in entries):
        entries.append(("content-length", str(len(body)).encode()))
    if timeout_ms is not None and (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0):
        raise Invalid(f"invalid: timeout_ms must be a non-negative integer, not {timeout_ms!r}")
    return method.upper(), scheme, authority, path, entries, body, timeout_ms


def _bindings():
    """`wasi:http`'s bindings: (outgoing_handler, types, streams)."""
    if not _wit.HTTP_AVAILABLE:
        raise RuntimeError(
            "burrow.http needs the host's wasi:http; it works only inside a component built "
            "with `python -m burrow.build` (world full-actor-http)"
        )
    return _wit.outgoing_handler, _wit.http_types, _wit.streams


def _method(types, method):
    known = {
        "GET": "Method_Get",
        "HEAD": "Method_Head",
        "POST": "Method_Post",
        "PUT": "Method_Put",
        "DELETE": "Method_Delete",
        "CONNECT": "Method_Connect",
        "OPTIONS": "Method_Options",
        "TRACE": "Method_Trace",
        "PATCH": "Method_Patch",
    }
    if method in known:
        return getattr(types, known[method])()
    return types.Method_Other(method)


def _send(prepared):
    method, scheme, authority, path, entries, body, timeout_ms = prepared
    handler, types, streams = _bindings()
    url = f"{scheme}://{authority}{path}"
    try:
        fields = types.Fields.from_list(entries)
    except Err as e:
        raise Invalid(f"invalid: a header is not valid: {_describe(e.value)}") from None
    request = types.OutgoingRequest(fields)
    for setter, value, what in (
        (request.set_method, _method(types, method), "the method"),
        (request.set_scheme, types.Scheme_Https() if scheme == "https" else types.Scheme_Http(), "the scheme"),
        (request.set_authority, authority, "the authority"),
        (request.set_path_with_query, path, "the path"),
    ):
        try:
            setter(value)
        except Err:
            request.__exit__(None, None, None)
            raise Invalid(f"invalid: {what} of `{url}`") from None
    options = None
    if timeout_ms is not None:
        options = types.RequestOptions()
        ns = timeout_ms * 1_000_000
        for setter in (options.set_connect_timeout, options.set_first_byte_timeout, options.set_between_bytes_timeout):
            try:
                setter(ns)
            except Err:
                pass
    outgoing = request.body()
    try:
        future = handler.handle(request, options)
    except Err as e:
        outgoing.__exit__(None, None, None)
        raise _error_of(e.value) from None
    with future:
        written = _write_body(types, outgoing, body)
        while True:
            answer = future.get()
            if answer is not None:
                break
            with future.subscribe() as pollable:
                pollable.block()
        if isinstance(answer, Err):
            raise Failed("failed: the answer was taken already")
        answer = answer.value
        if isinstance(answer, Err):
            raise _error_of(answer.value)
        # A body the host stopped taking: the request's own error says why.
        if written is not None:
            raise written
        with answer.value as response:
            status = response.status()
            with response.headers() as fields:
                headers = fields.entries()
            incoming = response.consume()
            with incoming:
                data = _read_body(types, streams, incoming)
    return Response(status, headers, data)


def _write_body(types, outgoing, body):
    """Writes the body and finishes it; the error, if it failed."""
    failure = None
    with outgoing.write() as stream:
        for at in range(0, len(body), 4096):
            try:
                stream.blocking_write_and_flush(body[at:at + 4096])
            except Err as e:
                failure = Failed(f"failed: cannot send the body: {_stream_problem(e.value)}")
                break
    if failure is not None:
        # Dropped unfinished: the host abandons the request.
        outgoing.__exit__(None, None, None)
        return failure
    try:
        types.OutgoingBody.finish(outgoing, None)
    except Err as e:
        return _error_of(e.value)
    return None


def _stream_problem(error):
    """A stream error as text."""
    problem = getattr(error, "value", None)
    if problem is not None and hasattr(problem, "to_debug_string"):
        return problem.to_debug_string()
    return "the stream is closed"


def _read_body(types, streams, incoming):
    chunks = []
    with incoming.stream() as stream:
        while True:
            try:
                chunks.append(stream.blocking_read(64 * 1024))
            except Err as e:
                if isinstance(e.value, streams.StreamError_Closed):
                    break
                problem = e.value.value
                code = types.http_error_code(problem)
                if code is not None:
                    raise _error_of(code) from None
                raise Failed(f"failed: {problem.to_debug_string()}") from None
    return b"".join(chunks)


class _Message:
    """What an answer and a request for the handler share: headers as
    (lowercase name, text) pairs in `headers` (bytes in `raw_headers`) and
    a `body` of bytes."""

    _what = "message"

    def __init__(self, headers, body):
        self.raw_headers = [(name.lower(), bytes(value)) for name, value in headers]
        self.headers = [(name, value.decode("utf-8", "replace")) for name, value in self.raw_headers]
        self.body = body

    def header(self, name, default=None):
        """The first value of header `name` (any case), as text."""
        name = name.lower()
        for n, value in self.headers:
            if n == name:
                return value
        return default

    def text(self):
        """The body as text (invalid UTF-8 replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self):
        """The body read as JSON."""
        try:
            return _json.loads(self.body)
        except ValueError as e:
            raise _errors.Error("json", f"the {self._what}'s body is not JSON: {e}") from None


class Response(_Message):
    """An answer: `status` (200, 404, ...), `headers` (a list of (name,
    value) pairs, names in lowercase, in their order, values as text) and
    `body` (bytes)."""

    _what = "answer"

    def __init__(self, status, headers, body):
        super().__init__(headers, body)
        self.status = status

    @property
    def ok(self):
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def __repr__(self):
        return f"Response({self.status}, {len(self.body)} bytes)"


def request(method, url, *, headers=None, body=None, json=_NO_JSON, timeout_ms=None):
    """Sends a request and reads the whole answer.

    `method` is `GET`, `POST`, ... (any token); `url` an http:// or
    https:// URL; `headers` a dict or a list of (name, value) pairs;
    `body` bytes or text, or `json` any value (sent as JSON, with its
    content type); `timeout_ms` the longest each phase (connecting, waiting
    for the answer, each pause of its body) may take; the host cuts them at
    the call's or step's deadline anyway. Returns a `Response` whatever its
    status; raises an `HttpError` when there is no answer.
    """
    return _send(_prepare(method, url, headers, body, json, timeout_ms))


def get(url, **options):
    """A `GET` of `url` (the options of `request`)."""
    return request("GET", url, **options)


def post(url, **options):
    """A `POST` to `url` (the options of `request`)."""
    return request("POST", url, **options)


def put(url, **options):
    """A `PUT` to `url` (the options of `request`)."""
    return request("PUT", url, **options)


def delete(url, **options):
    """A `DELETE` of `url` (the options of `request`)."""
    return request("DELETE", url, **options)


# The actor's own HTTP handler.

_HANDLER = None


class Incoming(_Message):
    """A request for the actor's HTTP handler: `method` (`GET`, `POST`,
    ...), `path` (after `/actors/{actor}/{key}/http`, with its query, as
    the client wrote it; `/` at the least), `headers` (a list of (name,
    value) pairs, names in lowercase, values as text; Burrow's API token is
    not among them) and `body` (bytes)."""

    _what = "request"

    def __init__(self, method, path, headers, body):
        super().__init__(headers, body)
        self.method = method
        self.path = path

    def __repr__(self):
        return f"Incoming({self.method} {self.path}, {len(self.body)} bytes)"


class Reply:
    """The handler's answer: `status`, `headers` (a dict or a list of
    (name, value) pairs) and `body` (bytes or text)."""

    def __init__(self, status=200, headers=None, body=b""):
        self.status = status
        self.headers = headers
        self.body = body

    @classmethod
    def text(cls, status, text):
        """`status` with `text` as `text/plain; charset=utf-8`."""
        return cls(status, [("content-type", "text/plain; charset=utf-8")], text)

    @classmethod
    def json(cls, status, value):
        """`status` with `value` as JSON (`application/json`)."""
        return cls(status, [("content-type", "application/json")], _json.dumps(value, separators=(",", ":")))

    def __repr__(self):
        return f"Reply({self.status})"


def handler(fn):
    """Declares `fn(request: Incoming) -> Reply` the actor's HTTP handler
    (one per actor; the last declared wins)."""
    global _HANDLER
    _HANDLER = fn
    return fn


_METHODS = {
    "Method_Get": "GET",
    "Method_Head": "HEAD",
    "Method_Post": "POST",
    "Method_Put": "PUT",
    "Method_Delete": "DELETE",
    "Method_Connect": "CONNECT",
    "Method_Options": "OPTIONS",
    "Method_Trace": "TRACE",
    "Method_Patch": "PATCH",
}


def _read_request(types, streams, request):
    method = request.method()
    name = _METHODS.get(type(method).__name__)
    if name is None:
        name = method.value
    path = request.path_with_query() or "/"
    with request.headers() as fields:
        headers = fields.entries()
    try:
        incoming = request.consume()
    except Err:
        raise Failed("failed: the request's body was taken already") from None
    with incoming:
        body = _read_body(types, streams, incoming)
    return Incoming(name, path, headers, body)


def _reply_of(request):
    """What the handler answers `request` (an `Incoming`), or the
    exception it raised."""
    if _HANDLER is None:
        return Reply.json(
            404,
            {
                "error": {
                    "code": "no-http-handler",
                    "message": "this actor takes no HTTP requests: its module declares no @http.handler",
                }
            },
        )
    reply = _HANDLER(request)
    if not isinstance(reply, Reply):
        raise TypeError(f"the HTTP handler must return an http.Reply, not {type(reply).__name__}")
    return reply


def _serve(request, out):
    """`incoming-handler.handle`: reads the request, runs the handler and
    sends its reply. An exception sets an error instead of a response: the
    host rolls the request back and answers its error."""
    _, types, streams = _bindings()
    try:
        with request:
            incoming = _read_request(types, streams, request)
        reply = _reply_of(incoming)
        body = reply.body
        if isinstance(body, str):
            body = body.encode()
        elif not isinstance(body, (bytes, bytearray, memoryview)):
            raise TypeError(f"a reply's body must be bytes or text, not {type(body).__name__}")
        entries = _header_entries(reply.headers)
        if isinstance(reply.status, bool) or not isinstance(reply.status, int) or not 100 <= reply.status <= 599:
            raise ValueError(f"the reply's status {reply.status!r} is not valid")
    except Exception as e:
        problem = f"{type(e).__name__}: {e}"
        try:
            from . import log

            log.error(f"the HTTP handler raised {''.join(_traceback.format_exception(e))}")
        except Exception:
            pass
        types.ResponseOutparam.set(out, Err(types.ErrorCode_InternalError(problem)))
        return
    try:
        fields = types.Fields.from_list(entries)
    except Err as e:
        message = f"the reply's headers are not valid: {_describe(e.value)}"
        types.ResponseOutparam.set(out, Err(types.ErrorCode_InternalError(message)))
        return
    response = types.OutgoingResponse(fields)
    response.set_status_code(reply.status)
    outgoing = response.body()
    types.ResponseOutparam.set(out, Ok(response))
    # The host reads the body while it is written and answers once it is
    # finished; one left unfinished fails the request there.
    _write_body(types, outgoing, bytes(body))
