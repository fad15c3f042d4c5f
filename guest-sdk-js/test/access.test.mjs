import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { fake, reset } from './fake/host.mjs';
import { actor, caller, callerJson } from 'burrow-sdk';

beforeEach(reset);

const remind = (text) => text.length;
const fire = (text) => text;

test('an actor without internal actions has none', () => {
  const a = actor({ actions: { remind, fire } });
  assert.deepEqual(a.access.internal(), { names: [], fromActors: true });
});

test('internal actions are a list of names, or a list and whether other actors may call them', () => {
  assert.deepEqual(actor({ actions: { remind, fire }, internal: ['fire'] }).access.internal(), {
    names: ['fire'],
    fromActors: true,
  });
  const a = actor({ actions: { remind, fire }, internal: { actions: ['fire', 'remind'], fromActors: false } });
  assert.deepEqual(a.access.internal(), { names: ['fire', 'remind'], fromActors: false });
});

test('internal names only actions', () => {
  assert.throws(() => actor({ actions: { remind }, internal: ['fire'] }), /not one of the actions/);
  assert.throws(() => actor({ actions: { fire }, internal: 'fire' }), /list of action names/);
  assert.throws(() => actor({ actions: { fire }, internal: { actions: ['fire'], fromActors: 'no' } }), /fromActors: boolean/);
});

test('an internal action still runs when the host lets it through', async () => {
  const a = actor({ actions: { fire: [fire, 'string'] }, internal: ['fire'] });
  assert.equal(await a.guest.action('fire', '["x"]'), '"x"');
});

test('caller() reads the host and writes the host JSON', () => {
  const cases = [
    [{ tag: 'client', val: undefined }, { kind: 'client', identity: null }, { client: null }],
    [
      { tag: 'client', val: { name: 'ann', role: 'admin' } },
      { kind: 'client', identity: { name: 'ann', role: 'admin' } },
      { client: { name: 'ann', role: 'admin' } },
    ],
    [{ tag: 'actor', val: { actor: 'a', key: 'k' } }, { kind: 'actor', actor: 'a', key: 'k' }, { actor: { actor: 'a', key: 'k' } }],
    [{ tag: 'schedule' }, { kind: 'schedule' }, 'schedule'],
    [{ tag: 'host' }, { kind: 'host' }, 'host'],
  ];
  for (const [wit, expected, json] of cases) {
    fake.caller = { who: () => wit };
    assert.deepEqual(caller(), expected);
    assert.deepEqual(callerJson(caller()), json);
  }
});
