import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { fake, reset, fail } from './fake/host.mjs';
import { FutureIncomingResponse, live, forget } from './fake/http-types.mjs';
import { actor, fetch, Failure, HttpError, NotInStepError } from 'burrow-sdk';

// Every request the fake host was handed, and the answer it gives.
let sent;
beforeEach(() => {
  reset();
  forget();
  sent = [];
});

function answering(answer) {
  fake.http = {
    handle(request, options) {
      request.options = options;
      sent.push(request);
      return new FutureIncomingResponse(request, answer);
    },
  };
}

function refusing(code) {
  fake.http = {
    handle(request) {
      sent.push(request);
      fail(code.tag, code.val);
    },
  };
}

const bytes = (text) => new TextEncoder().encode(text);
const header = (request, name) => {
  const found = request.headers.find(([n]) => n === name);
  return found && new TextDecoder().decode(found[1]);
};

test('the SDK is the global fetch', () => {
  assert.equal(globalThis.fetch, fetch);
});

test('a POST puts its method, URL, headers and body on the wire, and the answer is a Response', async () => {
  answering({ status: 201, headers: [['content-type', bytes('application/json')], ['x-n', bytes('1')]], body: bytes('{"paid":true}') });
  const answer = await fetch('https://pay.example.com:8443/charges?currency=eur#top', {
    method: 'POST',
    headers: { 'Idempotency-Key': 'k1', 'content-type': 'application/json' },
    body: JSON.stringify({ amount: 1200 }),
    timeoutMs: 250,
  });
  const [request] = sent;
  assert.deepEqual(request.method, { tag: 'post' });
  assert.deepEqual(request.scheme, { tag: 'HTTPS' });
  assert.equal(request.authority, 'pay.example.com:8443');
  assert.equal(request.path, '/charges?currency=eur');
  assert.equal(header(request, 'idempotency-key'), 'k1');
  assert.equal(header(request, 'content-type'), 'application/json');
  assert.equal(header(request, 'content-length'), '15');
  assert.equal(new TextDecoder().decode(request.sentBody), '{"amount":1200}');
  assert.deepEqual(request.options.timeouts, [250000000n, 250000000n, 250000000n]);
  assert.ok(answer instanceof Response);
  assert.equal(answer.status, 201);
  assert.equal(answer.ok, true);
  assert.equal(answer.headers.get('x-n'), '1');
  assert.equal(answer.url, 'https://pay.example.com:8443/charges?currency=eur#top');
  assert.deepEqual(await answer.json(), { paid: true });
  assert.deepEqual(live(), []);
});

test('a GET of a Request sends no body and reads a large answer', async () => {
  answering({ status: 404, body: new Uint8Array(200000).fill(120) });
  const answer = await fetch(new Request('http://127.0.0.1:8080', { headers: [['x-trace', 't1']] }));
  const [request] = sent;
  assert.deepEqual(request.method, { tag: 'get' });
  assert.deepEqual(request.scheme, { tag: 'HTTP' });
  assert.equal(request.path, '/');
  assert.equal(header(request, 'x-trace'), 't1');
  assert.equal(header(request, 'content-length'), undefined);
  assert.equal(request.sentBody.length, 0);
  assert.equal(request.options, undefined);
  assert.equal(answer.status, 404);
  assert.equal(answer.ok, false);
  assert.equal((await answer.text()).length, 200000);
  assert.deepEqual(live(), []);
});

test('other methods, a body of many chunks, and answers without a body', async () => {
  answering({ status: 204 });
  const answer = await fetch('http://h/x', { method: 'PURGE', body: 'é'.repeat(5000) });
  assert.deepEqual(sent[0].method, { tag: 'other', val: 'PURGE' });
  assert.equal(sent[0].sentBody.length, 10000);
  assert.equal(header(sent[0], 'content-length'), '10000');
  assert.equal(answer.status, 204);
  assert.equal(answer.body, null);
  answering({ status: 200, body: bytes('ignored') });
  const head = await fetch('http://h/x', { method: 'HEAD' });
  assert.deepEqual(sent[1].method, { tag: 'head' });
  assert.equal(head.body, null);
  assert.deepEqual(live(), []);
});

test("the host's refusals reject with its text", async () => {
  const cases = [
    ['not-in-step: wasi:http/outgoing-handler.handle was called outside a step', NotInStepError, 'not-in-step', 'not-in-step',
      'wasi:http/outgoing-handler.handle was called outside a step'],
    ['not-allowed: the queue selector may only read', HttpError, 'http', 'not-allowed', 'not-allowed: the queue selector may only read'],
    ['denied: actor `a` may not reach `http://x:1`', HttpError, 'http', 'denied', 'denied: actor `a` may not reach `http://x:1`'],
    ['limit: too many requests in flight', HttpError, 'http', 'denied', 'limit: too many requests in flight'],
    ['something else', HttpError, 'http', 'failed', 'failed: internal-error("something else")'],
  ];
  for (const [text, cls, code, kind, message] of cases) {
    refusing({ tag: 'internal-error', val: text });
    await assert.rejects(fetch('http://x:1/'), (e) => {
      assert.ok(e instanceof cls, `${text}: ${e}`);
      assert.ok(e instanceof Failure);
      assert.equal(e.code, code);
      assert.equal(e.kind, kind);
      assert.equal(e.message, message);
      return true;
    });
    assert.deepEqual(live(), [], text);
  }
  refusing({ tag: 'connection-refused' });
  await assert.rejects(fetch('http://x:1/'), (e) => e instanceof HttpError && e.kind === 'failed' && e.message === 'failed: connection-refused');
});

test("an error in the answer's body, or the answer itself, is failed", async () => {
  answering({ status: 200, body: bytes('partial'), problem: { toDebugString: () => 'connection reset' } });
  await assert.rejects(fetch('http://x/'), (e) => e instanceof HttpError && e.message === 'failed: connection reset');
  assert.deepEqual(live(), []);
  answering({ error: { tag: 'connection-timeout' } });
  await assert.rejects(fetch('http://x/'), (e) => e instanceof HttpError && e.message === 'failed: connection-timeout');
  assert.deepEqual(live(), []);
  answering({ status: 999 });
  await assert.rejects(fetch('http://x/'), (e) => e instanceof HttpError && /status 999/.test(e.message));
});

test('bad requests fail before anything is sent', async () => {
  answering({ status: 200 });
  await assert.rejects(fetch('ftp://x/'), (e) => e instanceof HttpError && e.kind === 'invalid' && /not an http:\/\/ or https:\/\/ URL/.test(e.message));
  await assert.rejects(fetch('not a url'), TypeError);
  await assert.rejects(fetch('http://x/', { timeoutMs: -1 }), (e) => e instanceof HttpError && /timeoutMs/.test(e.message));
  await assert.rejects(fetch('http://x/', { method: 'BAD METHOD' }), TypeError);
  assert.deepEqual(sent, []);
  assert.deepEqual(live(), []);
});

test('ctx.stepKey is the open step\'s key, null outside', async () => {
  const keys = [];
  let key = null;
  fake.workflow = {
    beginStep: () => {
      key = 'a'.repeat(32);
      return { tag: 'run', val: 1 };
    },
    endStep: () => {
      key = null;
      return undefined;
    },
    stepKey: () => key ?? undefined,
  };
  fake.caller = { get: () => ({ tag: 'host' }) };
  await actor({
    workflow: async (ctx) => {
      keys.push(ctx.stepKey);
      await ctx.step('charge', () => keys.push(ctx.stepKey));
      keys.push(ctx.stepKey);
      return null;
    },
  }).workflowRunner.run('null');
  assert.deepEqual(keys, [null, 'a'.repeat(32), null]);
});
