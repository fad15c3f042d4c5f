import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { reset } from './fake/host.mjs';
import { IncomingRequest, live, forget } from './fake/http-types.mjs';
import { actor } from 'burrow-sdk';

beforeEach(() => {
  reset();
  forget();
});

const bytes = (text) => new TextEncoder().encode(text);
const text = (data) => new TextDecoder().decode(data);

/** Runs `definition`'s HTTP handler on `request`; what it set. */
async function serve(definition, request) {
  const out = {};
  await actor(definition).incomingHandler.handle(new IncomingRequest(request), out);
  assert.deepEqual(live(), [], 'every resource was released');
  return out.set;
}

test('the handler gets a standard Request and its Response is sent', async () => {
  const set = await serve(
    {
      async http(request) {
        const url = new URL(request.url);
        const body = await request.text();
        return Response.json(
          { method: request.method, path: url.pathname + url.search, body, signature: request.headers.get('x-signature') },
          { status: 201, headers: { 'x-hook': 'counted' } },
        );
      },
    },
    {
      method: { tag: 'post' },
      path: '/hooks/paid?order=7',
      headers: [['host', bytes('127.0.0.1:8080')], ['x-signature', bytes('sig')]],
      body: bytes('paid'),
    },
  );
  assert.equal(set.tag, 'ok');
  assert.equal(set.val.status, 201);
  const headers = Object.fromEntries(set.val.headers.map(([n, v]) => [n, text(v)]));
  assert.equal(headers['x-hook'], 'counted');
  assert.deepEqual(JSON.parse(text(set.val.sentBody)), {
    method: 'POST',
    path: '/hooks/paid?order=7',
    body: 'paid',
    signature: 'sig',
  });
});

test('a handler that throws sets an error, so that the host rolls back', async () => {
  const set = await serve(
    {
      http() {
        throw new Error('counted, then failed');
      },
    },
    { method: { tag: 'get' }, path: '/fail', headers: [] },
  );
  assert.equal(set.tag, 'err');
  assert.equal(set.val.tag, 'internal-error');
  assert.match(set.val.val, /counted, then failed/);
});

test('a handler must answer a Response', async () => {
  const set = await serve({ http: () => 'ok' }, { method: { tag: 'get' }, path: '/', headers: [] });
  assert.equal(set.tag, 'err');
  assert.match(set.val.val, /must return a Response/);
});

test('an actor without a handler answers 404 no-http-handler', async () => {
  const set = await serve({}, { method: { tag: 'other', val: 'PROPFIND' }, path: '/', headers: [] });
  assert.equal(set.tag, 'ok');
  assert.equal(set.val.status, 404);
  assert.equal(JSON.parse(text(set.val.sentBody)).error.code, 'no-http-handler');
});

test('http must be a function', () => {
  assert.throws(() => actor({ http: 'no' }), /http must be a function/);
});
