import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { fake, reset } from './fake/host.mjs';
import { actor, Failure, db } from 'burrow-sdk';

beforeEach(reset);

const add = (a, b) => (typeof a === 'bigint' || typeof b === 'bigint' ? BigInt(a) + BigInt(b) : a + b);
const counter = actor({
  actions: {
    add: [add, 'integer', 'integer'],
    loose: (a, b) => [a, b],
    none: () => 'none',
    echo: [(...args) => args, 'integer', 'number', 'string', 'boolean', ['integer'], 'any', 'string?', { name: 'string', age: 'integer?' }],
    refuse: () => {
      throw new Failure('no', 'never');
    },
    crash: () => undefined(),
    oom: () => {
      throw 'out of memory';
    },
    later: async (x) => x * 2,
    big: () => 2n ** 62n,
    bytes: () => new Uint8Array([0, 255]),
    cyclic: () => {
      const o = {};
      o.o = o;
      return o;
    },
  },
});

async function call(name, args) {
  try {
    return { ok: await counter.guest.action(name, args) };
  } catch (e) {
    return { err: e };
  }
}

test('arguments are decoded and results encoded', async () => {
  assert.deepEqual(await call('add', '[2, 3]'), { ok: '5' });
  assert.deepEqual(await call('loose', '["a", {"b": 1}]'), { ok: '["a",{"b":1}]' });
  assert.deepEqual(await call('none', '[]'), { ok: '"none"' });
  assert.deepEqual(await call('later', '[21]'), { ok: '42' });
  assert.deepEqual(await call('big', '[]'), { ok: '4611686018427387904' });
  assert.deepEqual(await call('bytes', '[]'), { ok: '[0,255]' });
  const echoed = '[1,2.5,"s",true,[1,2],{"x":null},null,{"name":"ada"}]';
  assert.deepEqual(await call('echo', echoed), { ok: echoed });
});

test('integers beyond 2^53 keep every digit', async () => {
  assert.deepEqual(await call('add', '[9223372036854775806, 1]'), { ok: '9223372036854775807' });
  const { err } = await call('add', '[9223372036854775808, 1]');
  assert.equal(err.tag, 'invalid-arguments');
  assert.match(err.val, /^argument 1: expected an integer in the i64 range/);
});

test('bad arguments say what is wrong, in the Rust SDK words', async () => {
  const invalid = async (name, args) => {
    const { err } = await call(name, args);
    assert.equal(err?.tag, 'invalid-arguments', `${name} ${args}: ${JSON.stringify(err)}`);
    return err.val;
  };
  assert.equal(await invalid('add', '[1]'), 'expected 2 arguments, got 1');
  assert.equal(await invalid('none', '[1]'), 'expected 0 arguments, got 1');
  assert.equal(await invalid('later', '[1, 2]'), 'expected 1 argument, got 2');
  assert.equal(await invalid('add', '[1, "x"]'), 'argument 2: expected an integer, found "x"');
  assert.equal(await invalid('add', '[1.5, 1]'), 'argument 1: expected an integer, found 1.5');
  assert.equal(await invalid('add', '[true, 1]'), 'argument 1: expected an integer, found true');
  assert.match(await invalid('add', '{}'), /JSON array/);
  assert.match(await invalid('add', '[1,'), /^arguments are not valid JSON/);
  const echo = (i, value) => {
    const args = [1, 2.5, 's', true, [1], null, null, { name: 'ada' }];
    args[i] = value;
    return invalid('echo', JSON.stringify(args));
  };
  assert.equal(await echo(1, 's'), 'argument 2: expected a number, found "s"');
  assert.equal(await echo(2, 1), 'argument 3: expected a string, found 1');
  assert.equal(await echo(3, 0), 'argument 4: expected a boolean, found 0');
  assert.equal(await echo(4, [1, 'x']), 'argument 5: [1]: expected an integer, found "x"');
  assert.equal(await echo(6, 5), 'argument 7: expected a string, found 5');
  assert.equal(await echo(7, { age: 3 }), 'argument 8: .name: expected a string, found nothing');
  assert.equal(await echo(7, []), 'argument 8: expected an object, found []');
});

test('an unknown action is named, after the array is checked', async () => {
  assert.deepEqual(await call('nope', '[1]'), { err: { tag: 'unknown-action', val: 'nope' } });
  assert.equal((await call('nope', '{')).err.tag, 'invalid-arguments');
});

test('errors keep their code and message; other exceptions are code error', async () => {
  assert.deepEqual(await call('refuse', '[]'), { err: { tag: 'failed', val: { code: 'no', message: 'never' } } });
  const { err } = await call('crash', '[]');
  assert.equal(err.tag, 'failed');
  assert.equal(err.val.code, 'error');
  assert.match(err.val.message, /^TypeError: /);
  assert.deepEqual(await call('oom', '[]'), { err: { tag: 'failed', val: { code: 'error', message: 'uncaught out of memory' } } });
  const cyclic = (await call('cyclic', '[]')).err;
  assert.equal(cyclic.val.code, 'json');
  assert.match(cyclic.val.message, /^the result could not be encoded as JSON/);
});

test('a db error escaping an action has code db', async () => {
  fake.db = { execute: () => { throw Object.defineProperty(new Error(), 'payload', { value: { tag: 'invalid-sql', val: 'near "SELEC": syntax error' } }); } };
  const a = actor({ actions: { q: () => db.query('SELEC 1') } });
  await assert.rejects(a.guest.action('q', '[]'), (e) => {
    assert.deepEqual(e, { tag: 'failed', val: { code: 'db', message: 'near "SELEC": syntax error' } });
    return true;
  });
});

test('hooks get typed inputs, and a misfit is invalid-input', async () => {
  const seen = [];
  const a = actor({
    create: [(input) => seen.push(input), { policy: 'string?' }],
    connect: [(id, params) => seen.push([id, params]), { name: 'string' }],
    disconnect: (id) => seen.push(id),
  });
  await a.guest.create('{"policy": "lifo"}');
  await a.guest.create('null').then(
    () => assert.fail('accepted null'),
    (e) => assert.equal(e.code, 'invalid-input'),
  );
  await a.connections.onConnect(7n, '{"name": "ada"}');
  await assert.rejects(a.connections.onConnect(8n, '{}'), (e) => {
    assert.equal(e.code, 'invalid-params');
    assert.match(e.message, /\.name: expected a string/);
    return true;
  });
  await a.connections.onDisconnect(7n);
  assert.deepEqual(seen, [{ policy: 'lifo' }, [7, { name: 'ada' }], 7]);
});

test('a bad declaration fails when the module loads (the build)', () => {
  assert.throws(() => actor({ action: {} }), /unknown part "action"/);
  assert.throws(() => actor({ actions: { a: [() => 1, 'int'] } }), /unknown type "int"/);
  assert.throws(() => actor({ actions: { a: 'x' } }), /must be a function/);
  assert.throws(() => actor({ queue: { policy: 'newest', process: () => 1 } }), /queue policy/);
});

test('the queue exports: policy, process, select', async () => {
  const a = actor({
    queue: {
      policy: () => ({ mode: 'custom', concurrency: null }),
      process: (event) => ({ got: event.payload, type: event.type, attempt: event.attempt }),
      select: (pending) => [pending.at(-1).id],
    },
  });
  assert.deepEqual(await a.processor.policy(), { mode: 'custom', concurrency: undefined });
  const event = { id: 3n, eventType: 't', payload: '{"a":1}', priority: 0, group: undefined, createdAt: 5n, attempt: 2 };
  assert.equal(await a.processor.process(event), '{"got":{"a":1},"type":"t","attempt":2}');
  assert.deepEqual(await a.processor.select([event, { ...event, id: 9n }]), [9n]);
  const none = actor({});
  assert.equal(await none.processor.policy(), undefined);
  assert.equal(await none.workflowRunner.hasWorkflow(), false);
  assert.deepEqual(await actor({ queue: { process: () => 1 } }).processor.policy(), { mode: 'fifo', concurrency: 1 });
});
