import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { fake, reset, fail } from './fake/host.mjs';
import { actor, Failure, StepFailure, WorkflowInterrupt } from 'burrow-sdk';

// A scripted workflow host: `recorded` holds what a replay returns per step
// name; other steps run, and their outcomes are kept in `ended`.
let calls;
let ended;
beforeEach(() => {
  reset();
  calls = [];
  ended = [];
});

function host({ recorded = {}, failAfter = {}, sleeps = {} } = {}) {
  fake.workflow = {
    beginStep(name, options) {
      calls.push(`begin ${name}`);
      if (recorded[name] !== undefined) return recorded[name];
      return { tag: 'run', val: 1 };
    },
    endStep(outcome) {
      ended.push(outcome);
      if (outcome.tag === 'ok') return undefined;
      const last = ended.length;
      if (failAfter.suspend) fail('suspend');
      return { kind: outcome.tag === 'error' ? 'exhausted' : outcome.tag, code: outcome.val.code, message: outcome.val.message, attempts: last };
    },
    sleep(name) {
      calls.push(`sleep ${name}`);
      if (sleeps[name] !== 'done') fail('suspend');
    },
    now: () => 1000n,
    joinEnter(name, race) {
      calls.push(`${race ? 'race' : 'join'} ${name}`);
      return recorded[`race ${name}`];
    },
    branch(i) {
      calls.push(`branch ${i}`);
    },
    joinExit(winner) {
      calls.push(`exit ${winner}`);
      return winner;
    },
    loopEnter(name, state) {
      calls.push(`loop ${name} ${state}`);
      return recorded[`loop ${name}`] ?? { tag: 'run', val: { index: 0, state } };
    },
    loopContinue(state) {
      calls.push(`continue ${state}`);
    },
    loopBreak(output) {
      calls.push(`break ${output}`);
    },
    loopLeave() {
      calls.push('leave');
    },
    queueNext: () => [{ id: 4n, eventType: 'go', payload: '"now"', priority: 0, group: undefined, createdAt: 1n, attempt: 1 }],
    version: (name, latest) => latest,
    removed: () => undefined,
  };
}

async function run(fn, input = 'null') {
  return actor({ workflow: fn }).workflowRunner.run(input);
}

test('steps run, and their outputs are the JSON a replay would return', async () => {
  host({ recorded: { first: { tag: 'done', val: '"from history"' } } });
  let ran = 0;
  const outcome = await run(async (ctx) => {
    const a = await ctx.step('first', () => {
      ran++;
      return 'fresh';
    });
    const b = await ctx.step('second', { retries: 1, timeout: 50 }, async () => ({ at: new Date(0), skip: undefined }));
    return [a, b];
  });
  assert.equal(ran, 0);
  assert.deepEqual(outcome, { tag: 'completed', val: '["from history",{"at":"1970-01-01T00:00:00.000Z"}]' });
  assert.deepEqual(calls, ['begin first', 'begin second']);
});

test('a failure comes back as data from tryStep, and kinds follow the error', async () => {
  host();
  const outcome = await run(async (ctx) => {
    const soft = await ctx.tryStep('soft', () => {
      throw new Failure('declined', 'card declined');
    });
    const hard = await ctx.tryStep('hard', () => {
      throw new Failure('fatal', 'no retry', { critical: true });
    });
    const bug = await ctx.tryStep('bug', () => null.x);
    assert.ok(soft.failure instanceof StepFailure);
    return { soft, hard: hard.failure, bug: bug.failure.code };
  });
  assert.deepEqual(ended.map((o) => o.tag), ['error', 'critical', 'error']);
  assert.deepEqual(JSON.parse(outcome.val), {
    soft: { ok: false, failure: { kind: 'exhausted', code: 'declined', message: 'card declined', attempts: 1 } },
    hard: { kind: 'critical', code: 'fatal', message: 'no retry', attempts: 2 },
    bug: 'error',
  });
});

test('an uncaught step failure runs the rollback handlers since the checkpoint, newest first', async () => {
  host();
  const undone = [];
  const outcome = await run(async (ctx) => {
    await ctx.stepWithRollback('reserve', () => 'r1', (out) => undone.push(`reserve:${out}`));
    ctx.rollbackCheckpoint('reserved');
    await ctx.stepWithRollback('charge', () => 'c1', (out) => undone.push(`charge:${out}`));
    await ctx.stepWithRollback('ship', { retries: 0 }, () => 's1', (out) => undone.push(`ship:${out}`));
    await ctx.step('confirm', () => {
      throw new Failure('out-of-stock', 'nothing left', { rollback: true });
    });
  });
  assert.deepEqual(undone, ['ship:s1', 'charge:c1']);
  assert.deepEqual(calls.slice(-2), ['begin rollback ship', 'begin rollback charge']);
  assert.equal(outcome.tag, 'failed');
  assert.equal(outcome.val.code, 'out-of-stock');
  assert.match(outcome.val.message, /^step failed for good: rollback after \d attempt\(s\): out-of-stock: nothing left$/);
});

test('a swallowed suspend still ends the run as interrupted', async () => {
  host();
  let after = 'not reached';
  const outcome = await run(async (ctx) => {
    try {
      await ctx.sleep('nap', 1000);
    } catch (e) {
      assert.ok(e instanceof WorkflowInterrupt);
    }
    try {
      await ctx.step('after', () => 'ran');
      after = 'ran';
    } catch (e) {
      after = e.kind;
    }
    return 'done';
  });
  assert.deepEqual(outcome, { tag: 'interrupted' });
  assert.equal(after, 'suspend');
  assert.deepEqual(calls, ['sleep nap']);
});

test('tryBlock catches failures but not rollbacks, unless asked', async () => {
  host();
  const outcome = await run(async (ctx) => {
    const caught = await ctx.tryBlock(async (ctx) => {
      await ctx.step('a', () => 1);
      await ctx.step('b', () => {
        throw new Failure('nope', 'block failed');
      });
      await ctx.step('c', () => 3);
    });
    const rollback = await ctx.tryBlock(
      (ctx) => ctx.step('d', () => { throw new Failure('undo', 'all', { rollback: true }); }),
      { catchRollback: true },
    );
    await assert.rejects(
      ctx.tryBlock((ctx) => ctx.step('e', () => { throw new Failure('undo', 'all', { rollback: true }); })),
      (e) => e instanceof StepFailure && e.kind === 'rollback',
    );
    return [caught.ok, caught.failure.code, rollback.failure.kind];
  });
  assert.deepEqual(JSON.parse(outcome.val), [false, 'nope', 'rollback']);
  assert.ok(!calls.includes('begin c'));
});

test('a join runs every branch even when one waits, then waits', async () => {
  host();
  const outcome = await run(async (ctx) =>
    ctx.join('both', [
      async (ctx) => {
        await ctx.step('a1', () => 'a');
        await ctx.sleep('a-nap', 100);
        return 'a';
      },
      async (ctx) => ctx.step('b1', () => 'b'),
    ]),
  );
  assert.deepEqual(outcome, { tag: 'interrupted' });
  assert.deepEqual(calls, ['join both', 'branch 0', 'begin a1', 'sleep a-nap', 'branch 1', 'begin b1', 'exit undefined']);
});

test('a join of finished branches returns their outputs in order', async () => {
  host({ sleeps: { 'a-nap': 'done' } });
  const outcome = await run(async (ctx) =>
    ctx.join('both', [
      async (ctx) => {
        await ctx.sleep('a-nap', 100);
        return 'a';
      },
      async () => 'b',
    ]),
  );
  assert.deepEqual(outcome, { tag: 'completed', val: '["a","b"]' });
});

test('a race keeps the first branch to finish, and a replay only the recorded one', async () => {
  host();
  const race = (ctx) =>
    ctx.race('first', [
      async (ctx) => {
        await ctx.sleep('slow-nap', 60000);
        return ctx.step('slow', () => 'slow');
      },
      async (ctx) => ctx.step('fast', () => 'fast'),
    ]);
  assert.deepEqual(await run(race), { tag: 'completed', val: '{"index":1,"value":"fast"}' });
  assert.deepEqual(calls, ['race first', 'branch 0', 'sleep slow-nap', 'branch 1', 'begin fast', 'exit 1']);
  calls = [];
  host({ recorded: { 'race first': 1, fast: { tag: 'done', val: '"fast"' } } });
  assert.deepEqual(await run(race), { tag: 'completed', val: '{"index":1,"value":"fast"}' });
  assert.deepEqual(calls, ['race first', 'branch 1', 'begin fast', 'exit 1']);
});

test('a loop carries its state as JSON and leaves on a failure', async () => {
  host();
  const outcome = await run(async (ctx) => {
    const sum = await ctx.repeat('count', { i: 0, sum: 0 }, async (ctx, s) => {
      if (s.i === 3) return { break: s.sum };
      const i = await ctx.step('add', () => s.i);
      return { continue: { i: s.i + 1, sum: s.sum + i } };
    });
    await ctx.repeat('broken', 0, () => ctx.step('boom', { retries: 0 }, () => { throw new Failure('boom', 'x'); }));
    return sum;
  });
  assert.deepEqual(calls.filter((c) => !c.startsWith('begin')), [
    'loop count {"i":0,"sum":0}',
    'continue {"i":1,"sum":0}',
    'continue {"i":2,"sum":1}',
    'continue {"i":3,"sum":3}',
    'break 3',
    'loop broken 0',
    'leave',
  ]);
  assert.equal(outcome.tag, 'failed');
  assert.equal(outcome.val.code, 'boom');
});

test('queue waits, time, versions; bad input and bad options fail the workflow', async () => {
  host();
  const outcome = await run(async (ctx) => {
    const event = await ctx.nextEvent('go', ['go']);
    return [event.payload, event.type, await ctx.now(), await ctx.version('v', 2)];
  });
  assert.deepEqual(outcome, { tag: 'completed', val: '["now","go",1000,2]' });
  const typed = actor({ workflow: [async (ctx, input) => input, { steps: 'integer' }] });
  const bad = await typed.workflowRunner.run('{"steps": "x"}');
  assert.equal(bad.val.code, 'invalid-input');
  const options = await run((ctx) => ctx.step('s', { retry: 3 }, () => 1));
  assert.equal(options.val.code, 'invalid-arguments');
  assert.match(options.val.message, /unknown step option "retry"/);
});

test('Math.random is refused to orchestration code, and allowed in steps and actions', async () => {
  host();
  const outcome = await run(async (ctx) => {
    const inStep = await ctx.step('roll', () => Math.random());
    assert.ok(inStep >= 0 && inStep < 1);
    Math.random();
  });
  assert.equal(outcome.tag, 'failed');
  assert.equal(outcome.val.code, 'not-in-step');
  assert.match(outcome.val.message, /^Math\.random\(\) was called by workflow orchestration code/);
  const r = Math.random();
  assert.ok(r >= 0 && r < 1);
});
