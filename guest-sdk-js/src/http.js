// Outgoing HTTP: the standard `fetch`, with componentize-js's `Request`,
// `Response` and `Headers`, sent through wasi:http.
//
//     const answer = await fetch('https://pay.example.com/charges', {
//       method: 'POST',
//       headers: { 'content-type': 'application/json', 'idempotency-key': ctx.stepKey },
//       body: JSON.stringify({ amount: 1200 }),
//     });
//
// An actor reaches only what its manifest lists (`http = [...]`); the host
// refuses everything else before any connection. In a workflow, requests
// are side effects: they work inside a step, and orchestration code gets
// `NotInStepError`. A failed attempt of a step may be retried; `ctx.stepKey`
// is the same for every attempt: send it as `Idempotency-Key`.
//
// The engine's own `fetch` reports every failure as the same bare
// `TypeError`, so the SDK sends the request itself, through the imports of
// `wasi:http` (blocking: the action or step waits for the answer, the host
// meanwhile runs other instances), and replaces the global `fetch` with its
// own when the SDK is loaded. A refusal of the host is thrown with the
// host's text: `NotInStepError` (orchestration code), or `HttpError` with
// `kind` `not-allowed` (the queue selector), `denied` (not listed, an
// address the actor may not reach, too many requests in flight),
// `invalid` or `failed` (no connection, a timeout, a body over its limit,
// a broken answer). `init.timeoutMs` (Burrow's) bounds each phase of the
// request: connecting, the first byte of the answer, each pause in its
// body; the host cuts them at the call's or step's deadline anyway.

import { handle } from 'wasi:http/outgoing-handler@0.2.12';
import { Fields, OutgoingBody, OutgoingRequest, RequestOptions } from 'wasi:http/types@0.2.12';
import { Failure, NotInStepError, payloadOf } from './errors.js';

/** A request got no answer: `kind` is `not-allowed`, `denied`, `invalid`
 * or `failed`; the message is the host's text. Code `http`. */
export class HttpError extends Failure {
  constructor(kind, message) {
    super('http', message);
    this.kind = kind;
  }
}
Object.defineProperty(HttpError.prototype, 'name', { value: 'HttpError', writable: true, configurable: true });

const DISPOSE = Symbol.dispose || Symbol.for('dispose');

/** Releases a resource now (the host refuses to drop one whose children
 * live, so they go in order, not when the collector gets to them). */
export function drop(resource) {
  if (resource !== null && resource !== undefined && typeof resource[DISPOSE] === 'function') resource[DISPOSE]();
}

const METHODS = {
  GET: 'get',
  HEAD: 'head',
  POST: 'post',
  PUT: 'put',
  DELETE: 'delete',
  CONNECT: 'connect',
  OPTIONS: 'options',
  TRACE: 'trace',
  PATCH: 'patch',
};

// The host's own refusals come as `error-code.internal-error` whose text
// starts with what was refused.
const REFUSALS = [
  ['not-in-step: ', (text, rest) => new NotInStepError(rest)],
  ['not-allowed: ', (text) => new HttpError('not-allowed', text)],
  ['denied: ', (text) => new HttpError('denied', text)],
  ['limit: ', (text) => new HttpError('denied', text)],
];

function describe(code) {
  if (code === null || typeof code !== 'object') return String(code);
  if (code.val === undefined) return String(code.tag);
  const val = JSON.stringify(code.val, (_, v) => (typeof v === 'bigint' ? v.toString() : v));
  return `${code.tag}(${val})`;
}

/** The error for a wasi:http `error-code`. */
export function errorOf(code) {
  if (code && code.tag === 'internal-error' && typeof code.val === 'string') {
    for (const [prefix, make] of REFUSALS) {
      if (code.val.startsWith(prefix)) return make(code.val, code.val.slice(prefix.length));
    }
  }
  return new HttpError('failed', `failed: ${describe(code)}`);
}

function invalid(message) {
  return new HttpError('invalid', `invalid: ${message}`);
}

/** A byte string (each character below 256, as `Headers` holds them) as bytes. */
function bytesOf(text) {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i) & 0xff;
  return bytes;
}

function textOf(bytes) {
  let text = '';
  for (const b of bytes) text += String.fromCharCode(b);
  return text;
}

/** Calls an import that fails with a WIT error; gives back the payload
 * (`undefined` for none) as `{error}`. */
function attempt(call) {
  try {
    return { value: call() };
  } catch (e) {
    const payload = payloadOf(e);
    if (payload === undefined && !(e && Object.prototype.hasOwnProperty.call(e, 'payload'))) throw e;
    return { error: payload ?? null };
  }
}

/**
 * Sends one request and reads its whole answer, blocking.
 * `{method, url, headers: [[name, value]], body: Uint8Array, timeoutMs}`
 * gives `{status, headers: [[name, value]], body: Uint8Array}`.
 */
export function send({ method, url, headers = [], body = new Uint8Array(0), timeoutMs }) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid(`\`${url}\` is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw invalid(`\`${url}\` is not an http:// or https:// URL`);
  if (parsed.username || parsed.password) throw invalid(`\`${url}\` carries credentials`);
  if (timeoutMs !== undefined && timeoutMs !== null && (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0)) {
    throw invalid(`timeoutMs must be a non-negative integer of milliseconds, not ${timeoutMs}`);
  }
  const entries = headers.map(([name, value]) => [String(name).toLowerCase(), typeof value === 'string' ? bytesOf(value) : value]);
  // A body of known length is sent with it, so the server (and the host's
  // limit) knows its size before reading it.
  if (body.length > 0 && !entries.some(([name]) => name === 'content-length')) {
    entries.push(['content-length', bytesOf(String(body.length))]);
  }
  const fields = attempt(() => Fields.fromList(entries));
  if ('error' in fields) throw invalid(`a header is not valid: ${describe(fields.error)}`);
  const request = new OutgoingRequest(fields.value);
  const upper = String(method).toUpperCase();
  const settings = [
    ['the method', () => request.setMethod(METHODS[upper] ? { tag: METHODS[upper] } : { tag: 'other', val: String(method) })],
    ['the scheme', () => request.setScheme({ tag: parsed.protocol === 'https:' ? 'HTTPS' : 'HTTP' })],
    ['the authority', () => request.setAuthority(parsed.host)],
    ['the path', () => request.setPathWithQuery(`${parsed.pathname || '/'}${parsed.search}`)],
  ];
  for (const [what, set] of settings) {
    if ('error' in attempt(set)) {
      drop(request);
      throw invalid(`${what} of \`${url}\``);
    }
  }
  let options;
  if (timeoutMs !== undefined && timeoutMs !== null) {
    options = new RequestOptions();
    const ns = BigInt(timeoutMs) * 1000000n;
    for (const set of [options.setConnectTimeout, options.setFirstByteTimeout, options.setBetweenBytesTimeout]) {
      attempt(() => set.call(options, ns));
    }
  }
  const outgoing = request.body();
  const sent = attempt(() => handle(request, options));
  if ('error' in sent) {
    drop(outgoing);
    throw errorOf(sent.error);
  }
  const future = sent.value;
  try {
    const written = writeBody(outgoing, body);
    let answer;
    for (;;) {
      answer = future.get();
      if (answer !== undefined) break;
      const pollable = future.subscribe();
      try {
        pollable.block();
      } finally {
        drop(pollable);
      }
    }
    if (answer.tag !== 'ok') throw new HttpError('failed', 'failed: the answer was taken already');
    if (answer.val.tag !== 'ok') throw errorOf(answer.val.val);
    // A body the host stopped taking: the request's own error says why.
    if (written) throw written;
    const response = answer.val.val;
    try {
      const status = response.status();
      const fieldsOf = response.headers();
      let names;
      try {
        names = fieldsOf.entries().map(([name, value]) => [name, textOf(value)]);
      } finally {
        drop(fieldsOf);
      }
      const incoming = response.consume();
      try {
        return { status, headers: names, body: readBody(incoming) };
      } finally {
        drop(incoming);
      }
    } finally {
      drop(response);
    }
  } finally {
    drop(future);
  }
}

/** Writes the body and finishes it; the error, if that failed. */
export function writeBody(outgoing, body) {
  const stream = outgoing.write();
  let failure;
  try {
    for (let at = 0; at < body.length; at += 4096) {
      const wrote = attempt(() => stream.blockingWriteAndFlush(body.subarray(at, at + 4096)));
      if ('error' in wrote) {
        failure = new HttpError('failed', `failed: cannot send the body: ${streamProblem(wrote.error)}`);
        break;
      }
    }
  } finally {
    drop(stream);
  }
  if (failure) {
    // Dropped unfinished: the host abandons the request.
    drop(outgoing);
    return failure;
  }
  const finished = attempt(() => OutgoingBody.finish(outgoing, undefined));
  if ('error' in finished) return errorOf(finished.error);
  return undefined;
}

function streamProblem(error) {
  if (error && error.tag === 'last-operation-failed' && error.val && typeof error.val.toDebugString === 'function') {
    const text = error.val.toDebugString();
    drop(error.val);
    return text;
  }
  return 'the stream is closed';
}

export function readBody(incoming) {
  const stream = incoming.stream();
  const chunks = [];
  let length = 0;
  try {
    for (;;) {
      const read = attempt(() => stream.blockingRead(65536n));
      if (!('error' in read)) {
        chunks.push(read.value);
        length += read.value.length;
        continue;
      }
      if (read.error && read.error.tag === 'closed') break;
      throw new HttpError('failed', `failed: ${streamProblem(read.error)}`);
    }
  } finally {
    drop(stream);
  }
  const body = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.length;
  }
  return body;
}

// Statuses whose answer has no body, by the Fetch standard.
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * The standard `fetch(input, init)`: `input` a URL or a `Request`, `init`
 * its options (`method`, `headers`, `body`), and Burrow's `timeoutMs`.
 * Resolves to a `Response` whatever its status (redirects are not
 * followed: a 3xx is the answer); rejects with `NotInStepError` or
 * `HttpError`, or a `TypeError` for a request `Request` itself refuses.
 */
export async function fetch(input, init = undefined) {
  const request = new Request(input, init);
  const body = request.body === null ? new Uint8Array(0) : new Uint8Array(await request.arrayBuffer());
  const headers = [];
  request.headers.forEach((value, name) => headers.push([name, value]));
  const answer = send({ method: request.method, url: request.url, headers, body, timeoutMs: init?.timeoutMs });
  if (answer.status < 200 || answer.status > 599) {
    throw new HttpError('failed', `failed: the answer's status ${answer.status} is not one a Response can hold`);
  }
  const empty = NULL_BODY.has(answer.status) || request.method === 'HEAD';
  const response = new Response(empty ? null : answer.body, { status: answer.status, headers: answer.headers });
  Object.defineProperty(response, 'url', { value: request.url, configurable: true });
  return response;
}

// Actors call the global `fetch`: it is the SDK's.
globalThis.fetch = fetch;
