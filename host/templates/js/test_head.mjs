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

