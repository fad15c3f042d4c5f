// wasi:http/types as componentize-js's bindings present it, in memory:
// resources are released with Symbol.dispose, and releasing one whose
// children live throws, as the host refuses it. `live()` lists what a test
// left unreleased.
import { ComponentError } from './host.mjs';

const DISPOSE = Symbol.dispose || Symbol.for('dispose');
const METHODS = ['get', 'head', 'post', 'put', 'delete', 'connect', 'options', 'trace', 'patch', 'other'];
const SCHEMES = ['HTTP', 'HTTPS', 'other'];
let resources = [];

export function live() {
  return resources.filter((r) => !r.released).map((r) => r.constructor.name);
}

export function forget() {
  resources = [];
}

class Resource {
  constructor(parent) {
    this.children = [];
    this.released = false;
    if (parent) parent.children.push(this);
    resources.push(this);
  }

  [DISPOSE]() {
    if (this.released) throw new Error(`${this.constructor.name} released twice`);
    const children = this.children.filter((c) => !c.released);
    if (children.length) throw new Error(`${this.constructor.name} released before its children ${children.map((c) => c.constructor.name)}`);
    this.released = true;
  }
}

export class Fields extends Resource {
  constructor(entries = []) {
    super();
    this.list = entries;
  }

  static fromList(entries) {
    for (const [name, value] of entries) {
      if (!(value instanceof Uint8Array)) throw new Error('a header value must be a Uint8Array');
      if (!name || /\s/.test(name)) throw new ComponentError({ tag: 'invalid-syntax' });
    }
    return new Fields(entries);
  }

  entries() {
    return this.list;
  }
}

export class OutputStream extends Resource {
  constructor(parent) {
    super(parent);
    this.data = [];
  }

  blockingWriteAndFlush(chunk) {
    if (chunk.length > 4096) throw new Error('over 4096 bytes at once');
    this.data.push(...chunk);
  }
}

export class InputStream extends Resource {
  constructor(parent, data, problem) {
    super(parent);
    this.left = data;
    this.problem = problem;
  }

  blockingRead(most) {
    if (typeof most !== 'bigint') throw new TypeError('the length is a u64');
    if (this.problem) throw new ComponentError({ tag: 'last-operation-failed', val: this.problem });
    if (this.left.length === 0) throw new ComponentError({ tag: 'closed' });
    const chunk = this.left.subarray(0, Number(most));
    this.left = this.left.subarray(Number(most));
    return chunk;
  }
}

export class OutgoingBody extends Resource {
  constructor(request) {
    super();
    this.request = request;
  }

  write() {
    this.stream = new OutputStream(this);
    return this.stream;
  }

  static finish(body, trailers) {
    if (!body.stream || !body.stream.released) throw new Error('finish before the stream was released');
    body.request.sentBody = Uint8Array.from(body.stream.data);
    body[DISPOSE]();
  }
}

export class OutgoingRequest extends Resource {
  constructor(fields) {
    super();
    fields[DISPOSE](); // moved into the request
    this.headers = fields.list;
  }

  // The bindings check a variant's tag against the WIT's case names.
  setMethod(method) {
    if (!METHODS.includes(method.tag)) throw new TypeError(`invalid variant tag value \`${JSON.stringify(method.tag)}\` specified for \`Method\``);
    if (method.tag === 'other' && !/^[A-Za-z]+$/.test(method.val)) throw new ComponentError(undefined);
    this.method = method;
  }

  setScheme(scheme) {
    if (!SCHEMES.includes(scheme.tag)) throw new TypeError(`invalid variant tag value \`${JSON.stringify(scheme.tag)}\` specified for \`Scheme\``);
    this.scheme = scheme;
  }

  setAuthority(authority) {
    this.authority = authority;
  }

  setPathWithQuery(path) {
    this.path = path;
  }

  body() {
    return new OutgoingBody(this);
  }
}

export class RequestOptions extends Resource {
  constructor() {
    super();
    this.timeouts = [];
  }

  setConnectTimeout(ns) {
    this.timeouts.push(ns);
  }

  setFirstByteTimeout(ns) {
    this.timeouts.push(ns);
  }

  setBetweenBytesTimeout(ns) {
    this.timeouts.push(ns);
  }
}

export class IncomingBody extends Resource {
  constructor(parent, answer) {
    super(parent);
    this.answer = answer;
  }

  stream() {
    return new InputStream(this, this.answer.body ?? new Uint8Array(0), this.answer.problem);
  }
}

export class IncomingResponse extends Resource {
  constructor(answer) {
    super();
    this.answer = answer;
  }

  status() {
    return this.answer.status;
  }

  headers() {
    const fields = new Fields(this.answer.headers ?? []);
    this.children.push(fields);
    return fields;
  }

  consume() {
    return new IncomingBody(this, this.answer);
  }
}

class Pollable extends Resource {
  block() {
    this.future.ready = true;
  }
}

/** What `handle` returns: the answer once a pollable was blocked on. */
export class FutureIncomingResponse extends Resource {
  constructor(request, answer) {
    super();
    this.request = request;
    this.answer = answer;
    this.ready = false;
  }

  subscribe() {
    const pollable = new Pollable(this);
    pollable.future = this;
    return pollable;
  }

  get() {
    if (!this.ready) return undefined;
    if (this.request.sentBody === undefined) throw new Error('the answer was awaited before the body was finished');
    if (this.answer.error) return { tag: 'ok', val: { tag: 'err', val: this.answer.error } };
    return { tag: 'ok', val: { tag: 'ok', val: new IncomingResponse(this.answer) } };
  }
}

/** The answer of an actor's HTTP handler, as it is built. */
export class OutgoingResponse extends Resource {
  constructor(fields) {
    super();
    fields[DISPOSE](); // moved into the response
    this.headers = fields.list;
    this.status = 200;
  }

  setStatusCode(status) {
    if (status < 100 || status > 599) throw new ComponentError(undefined);
    this.status = status;
  }

  body() {
    return new OutgoingBody(this);
  }
}

/** Where the handler's answer goes: `out.set` is what it was set to. */
export class ResponseOutparam {
  static set(out, response) {
    if (out.set !== undefined) throw new Error('the response was set twice');
    // Moved to the host.
    if (response.tag === 'ok') response.val[DISPOSE]();
    out.set = response;
  }
}

/** A request for the actor's HTTP handler:
 * `{method: {tag}, path, headers: [[name, Uint8Array]], body: Uint8Array}`. */
export class IncomingRequest extends Resource {
  constructor(request) {
    super();
    this.request = request;
  }

  method() {
    return this.request.method;
  }

  pathWithQuery() {
    return this.request.path;
  }

  headers() {
    const fields = new Fields(this.request.headers ?? []);
    this.children.push(fields);
    return fields;
  }

  consume() {
    return new IncomingBody(this, { body: this.request.body ?? new Uint8Array(0) });
  }
}
