import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { fake, reset, fail } from './fake/host.mjs';
import { db, state, queue, schedule, actors, events, Failure, NotInStepError, CallError, CapabilityError } from 'burrow-sdk';

beforeEach(reset);

function result(columns, rows, changes = 0n, lastInsertRowid = 0n) {
  return { columns, rows, changes, lastInsertRowid };
}

test('rows are plain objects by name, and reachable by position', () => {
  let bound;
  fake.db = {
    execute(sql, params) {
      bound = params;
      return result(
        ['one', 'two', 'three', 'four', 'five', 'big'],
        [[{ tag: 'integer', val: 1n }, { tag: 'text', val: 'two' }, { tag: 'null' }, { tag: 'real', val: 2.5 }, { tag: 'blob', val: new Uint8Array([0, 255]) }, { tag: 'integer', val: 2n ** 60n }]],
        0n,
        7n,
      );
    },
  };
  const rows = db.query('SELECT ...', [1, 1.5, 2n, 'x', true, null, undefined, new Uint8Array([1])]);
  assert.deepEqual(bound, [
    { tag: 'integer', val: 1n },
    { tag: 'real', val: 1.5 },
    { tag: 'integer', val: 2n },
    { tag: 'text', val: 'x' },
    { tag: 'integer', val: 1n },
    { tag: 'null' },
    { tag: 'null' },
    { tag: 'blob', val: new Uint8Array([1]) },
  ]);
  const [row] = rows;
  assert.equal(row[0], 1);
  assert.equal(row.two, 'two');
  assert.equal(row[2], null);
  assert.equal(row.four, 2.5);
  assert.deepEqual([...row.five], [0, 255]);
  assert.equal(row.big, 2n ** 60n);
  assert.deepEqual(Object.keys(row), ['one', 'two', 'three', 'four', 'five', 'big']);
  assert.deepEqual(rows.columns, ['one', 'two', 'three', 'four', 'five', 'big']);
  assert.equal(rows.lastInsertRowid, 7);
  assert.deepEqual(db.valuesOf(row).slice(0, 2), [1, 'two']);
  assert.equal(db.queryValue('SELECT 1'), 1);
  assert.equal(db.queryOne('SELECT 1').two, 'two');
});

test('a statement without rows, bad parameters, and every db-error variant', () => {
  fake.db = { execute: () => result(['x'], [], 3n) };
  assert.equal(db.execute('DELETE FROM t'), 3);
  assert.throws(() => db.queryOne('SELECT x FROM t'), (e) => e instanceof Failure && e.code === 'no-rows');
  assert.throws(() => db.query('SELECT ?', [{}]), (e) => e instanceof db.InvalidParametersError && /parameter 1 is a object/.test(e.message));
  assert.throws(() => db.query('SELECT ?', 5), db.InvalidParametersError);
  const variants = {
    'invalid-sql': db.InvalidSqlError,
    constraint: db.ConstraintError,
    denied: db.DeniedError,
    'limit-exceeded': db.LimitExceededError,
    'invalid-parameters': db.InvalidParametersError,
    'not-allowed': db.NotAllowedError,
    other: db.OtherDbError,
  };
  for (const [tag, cls] of Object.entries(variants)) {
    fake.db = { execute: () => fail(tag, `the ${tag} text`), executeBatch: () => fail(tag, 'batch') };
    assert.throws(() => db.execute('X'), (e) => {
      assert.ok(e instanceof cls && e instanceof db.DbError && e instanceof Failure, tag);
      assert.equal(e.kind, tag);
      assert.equal(e.code, 'db');
      assert.equal(e.message, `the ${tag} text`);
      assert.equal(e.name, cls.name);
      return true;
    });
    assert.throws(() => db.executeBatch('X'), cls);
  }
  fake.db = { execute: () => fail('not-in-step', 'db.execute was called outside a step') };
  assert.throws(() => db.execute('X'), (e) => e instanceof NotInStepError && e.code === 'not-in-step' && e.message === 'db.execute was called outside a step');
});

test('state holds JSON, and update writes what the function returns or changed', () => {
  let stored;
  fake.state = {
    get: () => stored,
    set: (bytes) => {
      stored = bytes;
    },
  };
  assert.equal(state.get(), undefined);
  assert.deepEqual(state.get({}), {});
  assert.deepEqual(state.update((s) => { s.a = (s.a ?? 0) + 1; }, {}), { a: 1 });
  assert.deepEqual(state.update((s) => { s.a += 1; }, {}), { a: 2 });
  assert.equal(new TextDecoder().decode(stored), '{"a":2}');
  state.set(5);
  assert.equal(state.update((n) => n + 1, 0), 6);
  fake.state.set = () => fail('too-large', 1048576n);
  assert.throws(() => state.set('x'), (e) => e instanceof CapabilityError && e.code === 'state' && e.kind === 'too-large' && /1048576 bytes/.test(e.message));
  fake.state.get = () => new TextEncoder().encode('{');
  assert.throws(() => state.get(), (e) => e.code === 'state' && /does not decode/.test(e.message));
});

test('queue, schedules, calls and broadcasts encode their arguments', () => {
  const seen = [];
  fake.queue = { append: (...args) => (seen.push(args), 12n) };
  fake.schedule = {
    after: (...args) => (seen.push(args), 1n),
    at: (...args) => (seen.push(args), 2n),
    every: (...args) => (seen.push(args), 3n),
    pending: () => [{ id: 1n, action: 'note', args: '["x"]', at: 5n, everyMs: undefined }],
    cancel: (id) => id === 1n,
  };
  fake.actors = { call: (...args) => (seen.push(args), '{"n": 1}'), send: (...args) => (seen.push(args), 4n) };
  fake.events = { broadcast: (...args) => seen.push(args) };
  assert.equal(queue.append('t', { a: 1 }, { priority: -2, group: 'g' }), 12);
  assert.equal(schedule.after(10, 'note', ['x']), 1);
  assert.equal(schedule.at(0, 'note'), 2);
  assert.equal(schedule.every(100, 'note', [1n]), 3);
  assert.deepEqual(schedule.pending(), [{ id: 1, action: 'note', args: ['x'], at: 5, everyMs: null }]);
  assert.equal(schedule.cancel(1), true);
  assert.deepEqual(actors.call('counter', 'k', 'get', []), { n: 1 });
  assert.equal(actors.send('mailer', 'main', 'welcome', 'x'), 4);
  events.broadcast('said', { text: 'hi' });
  assert.deepEqual(seen, [
    ['t', '{"a":1}', { priority: -2, group: 'g' }],
    [10n, 'note', '["x"]'],
    [0n, 'note', '[]'],
    [100n, 'note', '[1]'],
    ['counter', 'k', 'get', '[]'],
    ['mailer', 'main', 'welcome', '"x"', { priority: 0, group: undefined }],
    ['said', '{"text":"hi"}'],
  ]);
  assert.throws(() => schedule.after(10, 'note', 'x'), (e) => e.code === 'invalid-arguments');
  assert.throws(() => queue.append('t', 1, { priority: 1.5 }), (e) => e.code === 'invalid-arguments');
});

test('call errors keep the callee code, or name what went wrong', () => {
  const cases = [
    [{ tag: 'failed', val: { code: 'insufficient-funds', message: 'no' } }, 'failed', 'insufficient-funds', 'no'],
    [{ tag: 'unavailable', val: { code: 'trapped', message: 'boom' } }, 'unavailable', 'unavailable', 'trapped: boom'],
    [{ tag: 'cycle', val: 'a -> b -> a' }, 'cycle', 'cycle', 'a -> b -> a'],
    [{ tag: 'invalid', val: 'unknown actor' }, 'invalid', 'invalid', 'unknown actor'],
    [{ tag: 'not-allowed', val: 'in select' }, 'not-allowed', 'not-allowed', 'in select'],
  ];
  for (const [payload, kind, code, message] of cases) {
    fake.actors = { call: () => fail(payload.tag, payload.val) };
    assert.throws(() => actors.call('a', 'b', 'c'), (e) => {
      assert.ok(e instanceof CallError);
      assert.deepEqual([e.kind, e.code, e.message], [kind, code, message]);
      return true;
    });
  }
  fake.actors = { call: () => fail('not-in-step', 'actors.call') };
  assert.throws(() => actors.call('a', 'b', 'c'), NotInStepError);
});
