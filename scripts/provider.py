#!/usr/bin/env python3
"""A tiny payment provider on 127.0.0.1, for the payment examples, the
quickstart and their tests: no internet, no dependencies.

    python3 scripts/provider.py [--port 9300] [--secret whsec_burrow_example]

`POST /charges` with the JSON `{"order": str, "amount": int, "card": str,
"callback": url (optional)}`:

- the card `4000 0000 0000 0002` is declined: `402 {"error":
  "card-declined", "message": "the card for <order> was declined"}`;
- any other card is charged: `200 {"id": "ch_<n>", "order", "amount",
  "status": "paid"}`;
- with a `callback`, the charge answers `"status": "pending"` at once, and
  settles a moment later: the provider POSTs `{"id", "order", "status":
  "settled"}` to the callback, signed with `x-signature: <hex of
  HMAC-SHA256(secret, body)>` (retried a few times while the callback
  fails).

A request with an `Idempotency-Key` it has seen gets the answer it got
then, and charges nothing more. `GET /charges` lists every charge made,
and `GET /requests` counts the requests per order. The first line on
stdout is `provider listening on http://127.0.0.1:<port>` once it serves
(`--port 0` takes a free port).
"""

import argparse
import hashlib
import hmac
import json
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DECLINED = "4000 0000 0000 0002"


class Provider:
    def __init__(self, secret):
        self.secret = secret.encode()
        self.lock = threading.Lock()
        self.charges = []
        self.answers = {}
        self.requests = {}

    def charge(self, order, key):
        """The answer to a charge request: (status, body, settle)."""
        with self.lock:
            name = order.get("order", "?")
            self.requests[name] = self.requests.get(name, 0) + 1
            if key and key in self.answers:
                return self.answers[key] + (None,)
            if order.get("card") == DECLINED:
                answer = (402, {"error": "card-declined", "message": f"the card for {name} was declined"})
                settle = None
            else:
                charge = {
                    "id": f"ch_{len(self.charges) + 1}",
                    "order": name,
                    "amount": order.get("amount", 0),
                    "status": "pending" if order.get("callback") else "paid",
                }
                self.charges.append(charge)
                answer = (200, charge)
                settle = (order["callback"], charge) if order.get("callback") else None
            if key:
                self.answers[key] = answer
            return answer + (settle,)

    def settle(self, callback, charge):
        """POSTs the settlement to `callback`, signed, until it is taken."""
        body = json.dumps({"id": charge["id"], "order": charge["order"], "status": "settled"}).encode()
        signature = hmac.new(self.secret, body, hashlib.sha256).hexdigest()
        time.sleep(0.3)
        for _ in range(10):
            request = urllib.request.Request(
                callback,
                data=body,
                method="POST",
                headers={"content-type": "application/json", "x-signature": signature},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    if 200 <= answer.status < 300:
                        charge["status"] = "settled"
                        return
            except Exception as e:  # noqa: BLE001 - any failure is retried
                print(f"provider: the callback {callback} failed: {e}", file=sys.stderr, flush=True)
            time.sleep(1)


def handler_of(provider):
    class Handler(BaseHTTPRequestHandler):
        def answer(self, status, value):
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/charges":
                with provider.lock:
                    self.answer(200, provider.charges)
            elif self.path == "/requests":
                with provider.lock:
                    self.answer(200, provider.requests)
            else:
                self.answer(404, {"error": "not-found"})

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            if self.path != "/charges":
                self.answer(404, {"error": "not-found"})
                return
            try:
                order = json.loads(raw)
            except ValueError:
                self.answer(400, {"error": "invalid-json"})
                return
            if not isinstance(order, dict):
                self.answer(400, {"error": "invalid-json"})
                return
            status, body, settle = provider.charge(order, self.headers.get("idempotency-key"))
            self.answer(status, body)
            if settle is not None:
                threading.Thread(target=provider.settle, args=settle, daemon=True).start()

        def log_message(self, format, *args):
            pass

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9300)
    parser.add_argument("--secret", default="whsec_burrow_example", help="the key callbacks are signed with")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_of(Provider(args.secret)))
    print(f"provider listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
