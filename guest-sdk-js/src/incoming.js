// The actor's own HTTP handler: requests to
// `/actors/{actor}/{key}/http/{path...}` reach `http` of the actor's
// definition, a function like a fetch event's: it is given the standard
// `Request` and gives back (or resolves to) a `Response`.
//
//     export default actor({
//       async http(request) {
//         const url = new URL(request.url);
//         if (url.pathname === '/paid') {
//           state.set(await request.json());
//           return Response.json({ ok: true });
//         }
//         return new Response('no such hook', { status: 404 });
//       },
//       actions: { ... },
//     });
//
// It runs in one transaction, like an action: what it writes commits
// before the answer leaves. A handler that throws rolls it back (the SDK
// sets an error instead of a response). The request's URL is
// `http://<its Host>/<the path after /http>?<query>`.

import { Fields, OutgoingResponse, ResponseOutparam } from 'wasi:http/types@0.2.12';
import { messageOf } from './errors.js';
import { drop, readBody, writeBody } from './http.js';

const NO_HANDLER = JSON.stringify({
  error: {
    code: 'no-http-handler',
    message: 'this actor takes no HTTP requests: its definition declares no `http` handler',
  },
});

function methodOf(method) {
  return method.tag === 'other' ? method.val : method.tag.toUpperCase();
}

function latin1(bytes) {
  let text = '';
  for (const b of bytes) text += String.fromCharCode(b);
  return text;
}

/** The standard `Request` of a wasi:http `incoming-request` (consumed). */
function requestOf(incoming) {
  const method = methodOf(incoming.method());
  const path = incoming.pathWithQuery() ?? '/';
  const fields = incoming.headers();
  const entries = fields.entries();
  drop(fields);
  const headers = new Headers();
  for (const [name, value] of entries) headers.append(name, latin1(value));
  const body = incoming.consume();
  const bytes = readBody(body);
  drop(body);
  const host = headers.get('host') ?? 'actor';
  const hasBody = method !== 'GET' && method !== 'HEAD';
  return new Request(`http://${host}${path}`, { method, headers, body: hasBody ? bytes : null });
}

/** Sends `response` (a `Response`) through `out`. */
async function send(out, response) {
  const status = response.status;
  const entries = [];
  const encoder = new TextEncoder();
  response.headers.forEach((value, name) => entries.push([name, encoder.encode(value)]));
  const bytes = new Uint8Array(await response.arrayBuffer());
  const outgoing = new OutgoingResponse(Fields.fromList(entries));
  outgoing.setStatusCode(status);
  const body = outgoing.body();
  ResponseOutparam.set(out, { tag: 'ok', val: outgoing });
  // The host reads the body while it is written and answers once it is
  // finished; one left unfinished fails the request there.
  writeBody(body, bytes);
}

/** The `wasi:http/incoming-handler` export of an actor whose handler is
 * `handler` (a function, or `null`: every request is answered 404
 * `no-http-handler`). */
export function incomingHandlerOf(handler) {
  return {
    async handle(request, out) {
      let response;
      try {
        if (handler === null) {
          drop(request);
          response = new Response(NO_HANDLER, { status: 404, headers: { 'content-type': 'application/json' } });
        } else {
          const standard = requestOf(request);
          drop(request);
          response = await handler(standard);
          if (!(response instanceof Response)) {
            throw new TypeError(`the http handler must return a Response, not ${response === null ? 'null' : typeof response}`);
          }
        }
        await send(out, response);
      } catch (e) {
        // An error instead of a response: the host rolls the request back.
        ResponseOutparam.set(out, { tag: 'err', val: { tag: 'internal-error', val: messageOf(e) } });
      }
    },
  };
}
