// Builds the actor and calls it on a host of the test's own (its data in
// build/test-data, where compiled components stay cached between runs) with
// the `burrow` command: `npm test`.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const ACTOR = '{{name}}';
const data = fileURLToPath(new URL('../build/test-data', import.meta.url));
const key = `test-${process.pid}`;

function burrow(...args) {
  const program = process.env.BURROW ?? 'burrow';
  const done = spawnSync(program, args, {
    env: { ...process.env, BURROW_DATA_DIR: data },
    encoding: 'utf8',
  });
  if (done.error) throw new Error(`cannot run ${program} (is Burrow installed?): ${done.error.message}`);
  assert.equal(done.status, 0, `burrow ${args.join(' ')} failed: ${done.stderr}${done.stdout}`);
  return done.stdout.trim();
}

test('the counter counts', () => {
  burrow('build');
  assert.equal(burrow('call', '--local', ACTOR, key, 'increment', '[2]'), '2');
  assert.equal(burrow('call', '--local', ACTOR, key, 'increment', '[3]'), '5');
  assert.equal(burrow('call', '--local', ACTOR, key, 'get'), '5');
});
