// The conformance actor `conformance-flow-js`, exactly as
// tests/conformance/SPEC.md describes it: one workflow scenario per create
// input.

import { actor, actors, db, events, queue, schedule, state, Failure, NotInStepError } from 'burrow-sdk';

const SELF = 'conformance-flow-js';

function migrate() {
  db.executeBatch(`
    CREATE TABLE IF NOT EXISTS applied (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS undone (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);`);
}

const apply = (name) => db.execute('INSERT INTO applied (name) VALUES (?)', [name]);
const names = (table) => db.query(`SELECT name FROM ${table} ORDER BY seq`).map((row) => row.name);
const result = (r) => (r.ok ? { ok: r.value ?? null } : { failed: r.failure.toJSON() });

async function steps(ctx, { count, step_ms: stepMs, pause_ms: pauseMs }) {
  const version = await ctx.version('v', 2);
  for (let i = 0; i < count; i++) {
    if (pauseMs != null && i === Math.floor(count / 2)) await ctx.sleep('pause', pauseMs);
    await ctx.step(`step-${i}`, () => {
      apply(`step-${i}`);
      if (stepMs != null) {
        const until = Date.now() + stepMs;
        while (Date.now() < until);
      }
      return i;
    });
  }
  return { count, version };
}

const SIDE_EFFECTS = [
  ['db.execute', () => db.execute("INSERT INTO applied (name) VALUES ('outside')")],
  ['db.execute-batch', () => db.executeBatch('DELETE FROM applied')],
  ['state.get', () => state.get()],
  ['state.set', () => state.set({ outside: true })],
  ['queue.append', () => queue.append('x', null)],
  ['schedule.after', () => schedule.after(10, 'applied', [])],
  ['schedule.at', () => schedule.at(0, 'applied', [])],
  ['schedule.every', () => schedule.every(1000, 'applied', [])],
  ['schedule.pending', () => schedule.pending()],
  ['schedule.cancel', () => schedule.cancel(1)],
  ['actors.call', () => actors.call(SELF, 'other', 'applied', [])],
  ['actors.send', () => actors.send(SELF, 'other', 'x', null)],
  ['events.broadcast', () => events.broadcast('x', null)],
];

async function outside(ctx) {
  const attempts = SIDE_EFFECTS.map(([call, attempt]) => {
    try {
      attempt();
      return { call, error: 'allowed', message: '' };
    } catch (e) {
      if (e instanceof NotInStepError) return { call, error: 'not-in-step', message: e.message };
      return { call, error: `${e?.name}: ${e?.message}`, message: String(e?.message ?? '') };
    }
  });
  await ctx.step('inside', () => {
    state.set({ inside: true });
    apply('inside');
  });
  return { outside: attempts };
}

async function tryStep(ctx) {
  const declined = await ctx.tryStep('declined', { retries: 2, backoffBase: 10, backoffCap: 50 }, () => {
    apply('declined');
    throw new Failure('declined', 'card declined');
  });
  const critical = await ctx.tryStep('critical', () => {
    throw new Failure('fatal', 'no retry', { critical: true });
  });
  const timeout = await ctx.tryStep('slow', { retries: 0, timeout: 200 }, () => {
    for (;;);
  });
  const fine = await ctx.tryStep('fine', () => 'fine');
  const block = await ctx.tryBlock(async (ctx) => {
    await ctx.step('block-a', () => {
      apply('block-a');
      return 1;
    });
    await ctx.step('block-b', { retries: 0 }, () => {
      throw new Failure('nope', 'block failed');
    });
    await ctx.step('block-c', () => apply('block-c'));
  });
  await ctx.step('after', () => apply('after'));
  return { declined: result(declined), critical: result(critical), timeout: result(timeout), fine: result(fine), block: result(block) };
}

async function rollback(ctx) {
  const undo = (name) => (output) => db.execute('INSERT INTO undone (name) VALUES (?)', [`${name}:${output}`]);
  const applying = (name, output) => () => {
    apply(name);
    return output;
  };
  await ctx.stepWithRollback('reserve', applying('reserve', 'r1'), undo('reserve'));
  ctx.rollbackCheckpoint('reserved');
  await ctx.stepWithRollback('charge', applying('charge', 'c1'), undo('charge'));
  await ctx.stepWithRollback('ship', applying('ship', 's1'), undo('ship'));
  await ctx.step('confirm', () => {
    throw new Failure('out-of-stock', 'nothing left', { rollback: true });
  });
}

async function loop(ctx, { iterations }) {
  const sum = await ctx.repeat('count', { i: 0, sum: 0 }, async (ctx, s) => {
    if (s.i === iterations) return { break: s.sum };
    const added = await ctx.step('add', () => {
      apply(`add-${s.i}`);
      return s.i;
    });
    return { continue: { i: s.i + 1, sum: s.sum + added } };
  });
  return { sum };
}

async function sleep(ctx, { ms }) {
  await ctx.step('before', () => apply('before'));
  const from = await ctx.now();
  await ctx.sleep('nap', ms);
  const to = await ctx.now();
  await ctx.step('after', () => apply('after'));
  return { from, to };
}

async function joinRace(ctx) {
  const applying = (name, output) => () => {
    apply(name);
    return output;
  };
  const join = await ctx.join('both', [
    async (ctx) => {
      await ctx.step('a1', applying('a1', 'a'));
      await ctx.sleep('a-nap', 100);
      await ctx.step('a2', applying('a2', 'a'));
      return 'a';
    },
    async (ctx) => {
      await ctx.step('b1', applying('b1', 'b'));
      return 'b';
    },
  ]);
  const race = await ctx.race('first', [
    async (ctx) => {
      await ctx.sleep('slow-nap', 60000);
      return ctx.step('slow', applying('slow', 'slow'));
    },
    (ctx) => ctx.step('fast', applying('fast', 'fast')),
  ]);
  return { join, race: { winner: race.index, value: race.value } };
}

async function queueWaits(ctx) {
  const go = await ctx.nextEvent('go', ['go']);
  const pings = await ctx.nextBatch('pings', ['ping'], 10);
  const none = await ctx.nextEvent('none', ['never'], 50);
  return { go: go.payload, pings: pings.map((e) => e.payload), none: none === null ? null : none.payload };
}

async function outgoing(ctx, { url }) {
  let outside;
  try {
    const answer = await fetch(url);
    outside = { error: 'allowed', message: '', status: answer.status };
  } catch (e) {
    if (e instanceof NotInStepError) outside = { error: 'not-in-step', message: e.message };
    else outside = { error: `${e?.name}: ${e?.message}`, message: String(e?.message ?? '') };
  }
  const keyOutside = ctx.stepKey;
  const charge = await ctx.step('charge', async () => {
    const key = ctx.stepKey;
    const answer = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ amount: 1200 }),
    });
    if (!answer.ok) throw new Failure('charge', `status ${answer.status}`);
    return { key, status: answer.status, body: await answer.text() };
  });
  return { outside, key_outside: keyOutside, charge };
}

const SCENARIOS = {
  steps,
  outside,
  'try-step': tryStep,
  rollback,
  loop,
  sleep,
  'join-race': joinRace,
  events: queueWaits,
  http: outgoing,
};

async function run(ctx, input) {
  if (input === null) return null;
  const scenario = SCENARIOS[input.scenario];
  if (!scenario) throw new Failure('unknown-scenario', `no scenario ${JSON.stringify(input.scenario)}`);
  return scenario(ctx, input);
}

export default actor({
  migrate,
  workflow: [run, 'object?'],
  actions: {
    applied: () => names('applied'),
    undone: () => names('undone'),
    state: () => state.get(null),
  },
});
