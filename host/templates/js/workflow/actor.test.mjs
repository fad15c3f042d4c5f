// Builds the actor and uses it on a host of the test's own (a new data
// directory; the compiled component stays in the user's compile cache) with
// the `burrow` command: `npm test`.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const ACTOR = '{{name}}';
const data = mkdtempSync(join(tmpdir(), `${ACTOR}-test-`));
after(() => rmSync(data, { recursive: true, force: true }));

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

test('the workflow counts to its steps and once more', async () => {
  burrow('build');
  burrow('create', '--local', ACTOR, 'test', '{"steps": 3}');
  // Each command's host runs the workflow while it lives; a later one
  // resumes it where it was.
  let count;
  for (let i = 0; i < 100; i++) {
    count = burrow('call', '--local', ACTOR, 'test', 'count');
    if (count === '4') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal(count, '4');
});
