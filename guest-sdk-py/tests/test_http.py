"""burrow.http against a fake of wasi:http's bindings: what a request puts
on the wire, how the host's refusals become exceptions, the answer, and
that every resource is released, children before their parents (the host
refuses to drop a resource whose children live).

    python3 -m unittest discover -s guest-sdk-py/tests
"""

import os
import sys
import unittest
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import burrow  # noqa: E402
from burrow import _wit, http  # noqa: E402
from burrow._wit import Err  # noqa: E402


class Resource:
    """A resource of the fake host: released once, after its children."""

    def __init__(self, host, parent=None):
        self.host = host
        self.parent = parent
        self.children = []
        self.released = False
        host.live.append(self)
        if parent is not None:
            parent.children.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def release(self):
        assert not self.released, f"{type(self).__name__} released twice"
        live = [c for c in self.children if not c.released]
        assert not live, f"{type(self).__name__} released before its children {live}"
        self.released = True


class FakeHost:
    """The bindings `burrow.http` uses: (outgoing_handler, types, streams)."""

    def __init__(self, answer=None, refuse=None, body=b"", headers=(), read_error=None):
        self.live = []
        self.sent = None
        self.options = None
        self.answer_status = answer
        self.refuse = refuse
        self.answer_body = body
        self.answer_headers = list(headers)
        self.read_error = read_error
        host = self

        class Types:
            pass

        types = Types()
        for name in ("Get", "Head", "Post", "Put", "Delete", "Connect", "Options", "Trace", "Patch"):
            setattr(types, f"Method_{name}", type(f"Method_{name}", (), {}))

        @dataclass
        class Method_Other:
            value: str

        @dataclass
        class ErrorCode_InternalError:
            value: object

        class ErrorCode_ConnectionRefused:
            pass

        class Scheme_Http:
            pass

        class Scheme_Https:
            pass

        types.Method_Other = Method_Other
        types.ErrorCode_InternalError = ErrorCode_InternalError
        types.ErrorCode_ConnectionRefused = ErrorCode_ConnectionRefused
        types.Scheme_Http = Scheme_Http
        types.Scheme_Https = Scheme_Https

        class Fields(Resource):
            def __init__(self, entries):
                Resource.__init__(self, host)
                self.list = list(entries)

            @classmethod
            def from_list(cls, entries):
                for name, _ in entries:
                    if not name or " " in name:
                        raise Err(HeaderError_InvalidSyntax())
                return cls(entries)

            def entries(self):
                return list(self.list)

        class HeaderError_InvalidSyntax:
            pass

        class Stream(Resource):
            def __init__(self, parent, data=b""):
                Resource.__init__(self, host, parent)
                self.data = bytearray()
                self.left = data

            def blocking_write_and_flush(self, chunk):
                assert len(chunk) <= 4096
                self.data += chunk

            def blocking_read(self, most):
                if host.read_error is not None:
                    raise Err(StreamError_LastOperationFailed(host.read_error))
                if not self.left:
                    raise Err(StreamError_Closed())
                chunk, self.left = self.left[:most], self.left[most:]
                return chunk

        class OutgoingBody(Resource):
            def __init__(self, request):
                Resource.__init__(self, host)
                self.request = request
                self.stream = None
                self.finished = False

            def write(self):
                self.stream = Stream(self)
                return self.stream

            @staticmethod
            def finish(body, trailers):
                assert body.stream is not None and body.stream.released, "finish before the stream was released"
                body.request.sent_body = bytes(body.stream.data)
                body.finished = True
                body.release()

        class OutgoingRequest(Resource):
            def __init__(self, fields):
                Resource.__init__(self, host)
                fields.release()  # moved into the request
                self.headers = fields.list
                self.method = self.scheme = self.authority = self.path = None
                self.sent_body = None

            def set_method(self, method):
                if isinstance(method, Method_Other) and not method.value.isalpha():
                    raise Err(None)
                self.method = method

            def set_scheme(self, scheme):
                self.scheme = scheme

            def set_authority(self, authority):
                self.authority = authority

            def set_path_with_query(self, path):
                self.path = path

            def body(self):
                return OutgoingBody(self)

        class RequestOptions(Resource):
            def __init__(self):
                Resource.__init__(self, host)
                self.timeouts = []

            def set_connect_timeout(self, ns):
                self.timeouts.append(ns)

            def set_first_byte_timeout(self, ns):
                self.timeouts.append(ns)

            def set_between_bytes_timeout(self, ns):
                self.timeouts.append(ns)

        class IncomingBody(Resource):
            def __init__(self, parent):
                Resource.__init__(self, host, parent)

            def stream(self):
                return Stream(self, host.answer_body)

        class IncomingResponse(Resource):
            def __init__(self):
                Resource.__init__(self, host)

            def status(self):
                return host.answer_status

            def headers(self):
                fields = Fields(host.answer_headers)
                self.children.append(fields)
                return fields

            def consume(self):
                return IncomingBody(self)

        class Pollable(Resource):
            def block(self):
                self.parent.ready = True

        class Future(Resource):
            def __init__(self, request):
                Resource.__init__(self, host)
                self.request = request
                self.ready = False

            def subscribe(self):
                return Pollable(host, self)

            def get(self):
                if not self.ready:
                    return None
                assert self.request.sent_body is not None, "the answer was awaited before the body was finished"
                return Ok(Ok(IncomingResponse()))

        @dataclass
        class Ok:
            value: object

        class Handler:
            @staticmethod
            def handle(request, options):
                request.release()  # moved into the call
                if options is not None:
                    options.release()
                    host.options = options
                host.sent = request
                if host.refuse is not None:
                    raise Err(host.refuse)
                return Future(request)

        class Streams:
            pass

        @dataclass
        class StreamError_LastOperationFailed:
            value: object

        class StreamError_Closed:
            pass

        streams = Streams()
        streams.StreamError_Closed = StreamError_Closed
        streams.StreamError_LastOperationFailed = StreamError_LastOperationFailed
        class OutgoingResponse(Resource):
            def __init__(self, fields):
                Resource.__init__(self, host)
                fields.release()  # moved into the response
                self.headers = fields.list
                self.status = 200
                self.sent_body = None

            def set_status_code(self, status):
                self.status = status

            def body(self):
                return OutgoingBody(self)

        class ResponseOutparam:
            @staticmethod
            def set(out, response):
                assert "set" not in out, "the response was set twice"
                if not isinstance(response, Err):
                    response.value.release()  # moved to the host
                out["set"] = response

        class IncomingRequest(Resource):
            def __init__(self, method, path, headers, body):
                Resource.__init__(self, host)
                self._method, self._path, self._headers, self._body = method, path, headers, body

            def method(self):
                return self._method

            def path_with_query(self):
                return self._path

            def headers(self):
                fields = Fields(self._headers)
                self.children.append(fields)
                return fields

            def consume(self):
                host.answer_body = self._body
                return IncomingBody(self)

        types.http_error_code = lambda error: None
        types.OutgoingResponse = OutgoingResponse
        types.ResponseOutparam = ResponseOutparam
        types.IncomingRequest = IncomingRequest
        types.Fields = Fields
        types.OutgoingRequest = OutgoingRequest
        types.OutgoingBody = OutgoingBody
        types.RequestOptions = RequestOptions
        self.types = types
        self.bindings = (Handler, types, streams)

    def unreleased(self):
        return [type(r).__name__ for r in self.live if not r.released]


class Http(unittest.TestCase):
    def fake(self, **kw):
        host = FakeHost(**kw)
        saved = http._bindings
        http._bindings = lambda: host.bindings
        self.addCleanup(setattr, http, "_bindings", saved)
        return host

    def test_a_post_with_json_puts_method_url_headers_and_body_on_the_wire(self):
        host = self.fake(answer=201, body=b'{"paid": true}', headers=[("Content-Type", b"application/json")])
        answer = http.post(
            "https://pay.example.com:8443/charges?currency=eur#top",
            json={"amount": 1200},
            headers={"Idempotency-Key": "k1"},
            timeout_ms=250,
        )
        request = host.sent
        self.assertEqual(type(request.method).__name__, "Method_Post")
        self.assertEqual(type(request.scheme).__name__, "Scheme_Https")
        self.assertEqual(request.authority, "pay.example.com:8443")
        self.assertEqual(request.path, "/charges?currency=eur")
        self.assertEqual(
            request.headers,
            [("idempotency-key", b"k1"), ("content-type", b"application/json"), ("content-length", b"15")],
        )
        self.assertEqual(request.sent_body, b'{"amount":1200}')
        self.assertEqual(host.options.timeouts, [250_000_000] * 3)
        self.assertEqual(answer.status, 201)
        self.assertTrue(answer.ok)
        self.assertEqual(answer.json(), {"paid": True})
        self.assertEqual(answer.header("CONTENT-TYPE"), "application/json")
        self.assertEqual(answer.headers, [("content-type", "application/json")])
        self.assertEqual(host.unreleased(), [])

    def test_a_get_sends_no_body_and_reads_a_large_answer(self):
        host = self.fake(answer=404, body=b"x" * 200_000)
        answer = http.get("http://127.0.0.1:8080")
        self.assertEqual(host.sent.path, "/")
        self.assertEqual(type(host.sent.scheme).__name__, "Scheme_Http")
        self.assertEqual(host.sent.headers, [])
        self.assertEqual(host.sent.sent_body, b"")
        self.assertIsNone(host.options)
        self.assertEqual(answer.status, 404)
        self.assertFalse(answer.ok)
        self.assertEqual(len(answer.body), 200_000)
        self.assertEqual(answer.text(), "x" * 200_000)
        self.assertEqual(host.unreleased(), [])

    def test_other_methods_and_a_body_of_many_chunks(self):
        host = self.fake(answer=200)
        http.request("purge", "http://h/x", body="é" * 5000)
        self.assertEqual(host.sent.method.value, "PURGE")
        self.assertEqual(host.sent.sent_body, ("é" * 5000).encode())
        self.assertIn(("content-length", b"10000"), host.sent.headers)
        http.put("http://h/x", body=b"a", headers=[("Content-Length", "1")])
        self.assertEqual(type(host.sent.method).__name__, "Method_Put")
        self.assertEqual([n for n, _ in host.sent.headers].count("content-length"), 1)
        http.delete("http://h/x")
        self.assertEqual(type(host.sent.method).__name__, "Method_Delete")

    def test_the_hosts_refusals_become_their_exceptions(self):
        cases = [
            ("not-in-step: wasi:http/outgoing-handler.handle: outside a step", http.NotInStep, "not-in-step",
             "wasi:http/outgoing-handler.handle: outside a step"),
            ("not-allowed: the queue selector may only read", http.NotAllowed, "not-allowed",
             "the queue selector may only read"),
            ("denied: actor `a` may not reach `http://x:1`", http.Denied, "http",
             "denied: actor `a` may not reach `http://x:1`"),
            ("limit: too many requests in flight", http.Denied, "http", "limit: too many requests in flight"),
            ("something else", http.Failed, "http", "failed: InternalError('something else')"),
        ]
        for text, cls, code, message in cases:
            with self.subTest(text=text):
                host = self.fake(refuse=FakeHost().types.ErrorCode_InternalError(text))
                with self.assertRaises(cls) as caught:
                    http.get("http://x:1/")
                e = caught.exception
                self.assertIsInstance(e, http.HttpError)
                self.assertIsInstance(e, burrow.Error)
                self.assertEqual(e.code, code)
                self.assertEqual(e.message, message)
                self.assertEqual(host.unreleased(), [])
        self.assertTrue(issubclass(http.NotInStep, burrow.NotInStep))
        self.assertTrue(issubclass(http.NotAllowed, burrow.NotAllowed))

    def test_a_transport_error_is_failed_with_its_code(self):
        host = self.fake(refuse=FakeHost().types.ErrorCode_ConnectionRefused())
        with self.assertRaises(http.Failed) as caught:
            http.get("http://x:1/")
        self.assertEqual(caught.exception.message, "failed: ConnectionRefused")
        self.assertEqual(caught.exception.kind, "failed")
        self.assertEqual(host.unreleased(), [])

    def test_bad_requests_are_invalid_before_anything_is_sent(self):
        host = self.fake(answer=200)
        for call, needle in [
            (lambda: http.get("ftp://x/"), "is not an http:// or https:// URL"),
            (lambda: http.get("http:///path"), "is not an http:// or https:// URL"),
            (lambda: http.get(5), "the URL must be a string"),
            (lambda: http.get("http://x/", headers={"x": 5}), "header `x` must be a string or bytes"),
            (lambda: http.get("http://x/", headers=[("x",)]), "a dict or a list of (name, value) pairs"),
            (lambda: http.get("http://x/", headers={"bad name": "v"}), "a header is not valid"),
            (lambda: http.post("http://x/", body=1), "the body must be bytes or a string"),
            (lambda: http.post("http://x/", body="a", json=1), "not both"),
            (lambda: http.get("http://x/", timeout_ms=-1), "timeout_ms must be a non-negative integer"),
            (lambda: http.request("", "http://x/"), "the method must be a non-empty string"),
            (lambda: http.request("BAD METHOD", "http://x/"), "the method of `http://x/`"),
        ]:
            with self.subTest(needle=needle):
                with self.assertRaises(http.Invalid) as caught:
                    call()
                self.assertIn(needle, caught.exception.message)
                self.assertEqual(caught.exception.code, "http")
        self.assertIsNone(host.sent)
        self.assertEqual(host.unreleased(), [])

    def test_a_broken_body_of_the_answer_fails(self):
        class Problem:
            def to_debug_string(self):
                return "connection reset"

        host = self.fake(answer=200, body=b"partial", read_error=Problem())
        with self.assertRaises(http.Failed) as caught:
            http.get("http://x/")
        self.assertEqual(caught.exception.message, "failed: connection reset")
        self.assertEqual(host.unreleased(), [])

    def test_an_answer_that_is_not_json(self):
        self.fake(answer=200, body=b"<html>")
        answer = http.get("http://x/")
        with self.assertRaises(burrow.Error) as caught:
            answer.json()
        self.assertEqual(caught.exception.code, "json")

    def test_outside_a_component_it_says_it_needs_the_host(self):
        if _wit.HTTP_AVAILABLE:
            self.skipTest("inside a component")
        with self.assertRaises(RuntimeError) as caught:
            http.get("http://x/")
        self.assertIn("needs the host's wasi:http", str(caught.exception))
        # Checked before that: a bad URL is the caller's mistake anywhere.
        with self.assertRaises(http.Invalid):
            http.get("nope")



class Handler(unittest.TestCase):
    """`@http.handler` and the `incoming-handler` export it is served by."""

    def serve(self, handler, method, path, headers=(), body=b""):
        host = FakeHost()
        saved_bindings, saved_handler = http._bindings, http._HANDLER
        http._bindings = lambda: host.bindings
        self.addCleanup(setattr, http, "_bindings", saved_bindings)
        self.addCleanup(setattr, http, "_HANDLER", saved_handler)
        http._HANDLER = None
        if handler is not None:
            http.handler(handler)
        out = {}
        request = host.types.IncomingRequest(method, path, list(headers), body)
        http._serve(request, out)
        self.assertEqual(host.unreleased(), [])
        return host, out["set"]

    def test_the_handler_reads_the_request_and_its_reply_is_sent(self):
        seen = []

        def hook(request):
            seen.append(request)
            return http.Reply.json(201, {"paid": request.json()["amount"]})

        types = FakeHost().types
        host, set_to = self.serve(
            hook,
            types.Method_Post(),
            "/hooks/paid?order=7",
            [("x-signature", b"sig"), ("content-type", b"application/json")],
            b'{"amount": 1200}',
        )
        request = seen[0]
        self.assertEqual((request.method, request.path), ("POST", "/hooks/paid?order=7"))
        self.assertEqual(request.header("X-Signature"), "sig")
        self.assertEqual(request.text(), '{"amount": 1200}')
        response = set_to.value
        self.assertEqual(response.status, 201)
        self.assertEqual(response.headers, [("content-type", b"application/json")])
        self.assertEqual(response.sent_body, b'{"paid":1200}')

    def test_an_exception_sets_an_error_so_that_the_host_rolls_back(self):
        def hook(request):
            raise burrow.Error("planned", "counted, then failed")

        types = FakeHost().types
        _, set_to = self.serve(hook, types.Method_Other("PROPFIND"), "/fail")
        self.assertIsInstance(set_to, Err)
        self.assertIn("counted, then failed", set_to.value.value)

    def test_a_reply_that_is_not_one_or_has_a_bad_status_is_an_error(self):
        types = FakeHost().types
        _, set_to = self.serve(lambda request: "ok", types.Method_Get(), "/")
        self.assertIn("must return an http.Reply", set_to.value.value)
        _, set_to = self.serve(lambda request: http.Reply(42), types.Method_Get(), "/")
        self.assertIn("status 42", set_to.value.value)

    def test_without_a_handler_the_answer_is_404_no_http_handler(self):
        types = FakeHost().types
        _, set_to = self.serve(None, types.Method_Get(), "/")
        self.assertEqual(set_to.value.status, 404)
        self.assertIn(b"no-http-handler", set_to.value.sent_body)


if __name__ == "__main__":
    unittest.main()
