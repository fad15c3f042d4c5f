#!/usr/bin/env node
// Builds a JavaScript actor into a WebAssembly component.
//
//   node guest-sdk-js/build.mjs <entry.js> <out.wasm> [--wit DIR] [--world NAME]
//
// The entry module ends with `export default actor({...})`. It is bundled
// (with the SDK, imported as 'burrow-sdk', and any npm packages it
// imports) into one module, which componentize-js turns into a component
// of the world `full-actor-http-server` of wit/http.wit (`full-actor` of
// wit/actor.wit, wasi:http for `fetch`, and the export of
// wasi:http/incoming-handler for the actor's `http` handler):
// SpiderMonkey, snapshotted after the module's top level has run.

import { componentize } from '@bytecodealliance/componentize-js';
import { rolldown } from 'rolldown';
import { existsSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const ENTRY = '\0burrow-entry';

function usage(message) {
  if (message) console.error(`build.mjs: ${message}`);
  console.error('usage: node build.mjs <entry.js> <out.wasm> [--wit DIR] [--world NAME]');
  process.exit(2);
}

function parseArgs(argv) {
  const positional = [];
  const options = { wit: undefined, world: 'full-actor-http-server' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--wit' || arg === '--world') {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      options[arg.slice(2)] = argv[++i];
    } else if (arg.startsWith('--')) {
      usage(`unknown option ${arg}`);
    } else {
      positional.push(arg);
    }
  }
  if (positional.length !== 2) usage('expected an entry module and an output path');
  return { entry: resolve(positional[0]), out: resolve(positional[1]), ...options };
}

/** The WIT package: the SDK's own copy when packed, else the repository's. */
function witDir(given) {
  if (given) return resolve(given);
  for (const dir of [join(here, 'wit'), join(here, '..', 'wit')]) {
    if (existsSync(join(dir, 'actor.wit'))) return dir;
  }
  throw new Error(`no wit/actor.wit next to ${here} or in its parent; pass --wit DIR`);
}

/** One ES module: the entry, the SDK and what they import, with the
 * component's own imports (`burrow:*`, `wasi:*`) left as imports, and the
 * world's exports taken from the entry's default export (the HTTP
 * handler's too, `withHandler`, when the world exports one). */
async function bundle(entry, withHandler) {
  const sdk = join(here, 'src');
  const build = await rolldown({
    input: ENTRY,
    platform: 'neutral',
    logLevel: 'warn',
    plugins: [
      {
        name: 'burrow',
        resolveId(id) {
          if (id === ENTRY) return ENTRY;
          if (id === 'burrow-sdk') return join(sdk, 'index.js');
          if (id === 'burrow-sdk/actor') return join(sdk, 'actor.js');
          if (/^(burrow|wasi):/.test(id)) return { id, external: true };
          return null;
        },
        load(id) {
          if (id !== ENTRY) return null;
          return [
            `import definition from ${JSON.stringify(entry)};`,
            `import { exportsOf } from 'burrow-sdk/actor';`,
            `const actor = exportsOf(definition);`,
            `export const guest = actor.guest;`,
            `export const processor = actor.processor;`,
            `export const workflowRunner = actor.workflowRunner;`,
            `export const connections = actor.connections;`,
            `export const access = actor.access;`,
            ...(withHandler ? [`export const incomingHandler = actor.incomingHandler;`] : []),
          ].join('\n');
        },
      },
    ],
  });
  try {
    const { output } = await build.generate({ format: 'esm', codeSplitting: false });
    return output[0].code;
  } finally {
    await build.close();
  }
}

/** What the component is made from: when these are the same as for the
 * component already at `out`, it is kept as it is. (componentize-js does not
 * make the same bytes twice, since the snapshot holds the engine's random
 * seeds, and the host's compile cache is keyed by the bytes: a rebuild of
 * unchanged sources would cost the host a compilation.) */
async function inputsDigest(code, wit, world) {
  const hash = createHash('sha256');
  // The SDK's package.json pins its build tools' versions; the lock file,
  // where there is one (in the repository, not in an installed package),
  // pins theirs too.
  for (const file of ['package.json', 'package-lock.json']) {
    const path = join(here, file);
    if (existsSync(path)) hash.update(await readFile(path)).update('\0');
  }
  hash.update(world).update('\0').update(code).update('\0');
  for (const sub of ['', 'deps']) {
    const dir = join(wit, sub);
    const files = existsSync(dir) ? (await readdir(dir)).filter((f) => f.endsWith('.wit')).sort() : [];
    for (const file of files) {
      hash.update(join(sub, file)).update('\0').update(await readFile(join(dir, file))).update('\0');
    }
  }
  hash.update(DISABLED.join(','));
  return hash.digest('hex');
}

// The engine's own fetch event is off: the SDK exports the actor's
// wasi:http handler itself (src/incoming.js). Outgoing HTTP stays: the engine's
// `Request`, `Response` and `Headers` (the SDK sends the requests itself,
// see src/http.js); so do clocks, random numbers and stdio (the host
// refuses clocks and randomness to workflow orchestration code).
const DISABLED = ['fetch-event'];

async function main() {
  const { entry, out, wit: givenWit, world } = parseArgs(process.argv.slice(2));
  if (!existsSync(entry)) usage(`no such file: ${entry}`);
  const started = Date.now();
  const wit = witDir(givenWit);
  const code = await bundle(entry, world === 'full-actor-http-server');
  const digest = await inputsDigest(code, wit, world);
  const stamp = `${out}.inputs`;
  if (existsSync(out) && (await readFile(stamp, 'utf8').catch(() => '')) === digest) {
    console.error(`${out} is up to date`);
    return;
  }
  const work = await mkdtemp(join(tmpdir(), 'burrow-js-'));
  try {
    const source = join(work, 'actor.js');
    await writeFile(source, code);
    const { component } = await componentize({
      sourcePath: source,
      witPath: wit,
      worldName: world,
      disableFeatures: DISABLED,
    });
    await mkdir(dirname(out), { recursive: true });
    await rm(stamp, { force: true });
    await writeFile(out, component);
    await writeFile(stamp, digest);
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const mb = (component.length / 1e6).toFixed(1);
    console.error(`built ${out} (${mb} MB) in ${seconds} s`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(`build.mjs: ${e.stack ?? e}`);
  process.exit(1);
});
