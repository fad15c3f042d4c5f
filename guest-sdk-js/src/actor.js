// `actor()`: an actor's hooks, queue, workflow, connection hooks and
// actions, turned into the exports of the WIT world `full-actor`.

import { Failure, messageOf, toWitFailure } from './errors.js';
import { parse, stringify } from './json.js';
import { eventFrom, witPolicy } from './queue.js';
import { TypeMismatch, check, validateType } from './types.js';
import { incomingHandlerOf } from './incoming.js';
import { runWorkflow } from './workflow.js';

const EXPORTS = Symbol('burrow exports');
const KEYS = new Set([
  'migrate', 'create', 'wake', 'sleep', 'destroy', 'queue', 'workflow', 'connect', 'disconnect', 'actions', 'internal',
  'http',
]);

/** `internal` as `{names, fromActors}`: a list of action names, or
 * `{actions: [...], fromActors}` (`fromActors` true unless false). */
function internalActions(value, actions) {
  if (value === undefined) return { names: [], fromActors: true };
  const list = Array.isArray(value) ? value : value?.actions;
  const fromActors = Array.isArray(value) ? true : value?.fromActors ?? true;
  if (!Array.isArray(list) || typeof fromActors !== 'boolean') {
    throw new Error('internal must be a list of action names, or {actions: [...names], fromActors: boolean}');
  }
  for (const name of list) {
    if (!actions.has(name)) throw new Error(`internal names ${JSON.stringify(name)}, which is not one of the actions`);
  }
  return { names: [...new Set(list)], fromActors };
}

/** `fn` or `[fn, ...types]` as `{fn, types}`; `types` is null for a bare
 * function. */
function callable(value, where) {
  if (typeof value === 'function') return { fn: value, types: null };
  if (Array.isArray(value) && typeof value[0] === 'function') {
    const types = value.slice(1);
    types.forEach((t, i) => validateType(t, `${where}, type ${i + 1}`));
    return { fn: value[0], types };
  }
  throw new Error(`${where} must be a function, or [function, ...argument types]`);
}

function hook(value, where, maxTypes) {
  if (value === undefined) return null;
  const c = callable(value, where);
  if (c.types !== null && c.types.length > maxTypes) {
    throw new Error(`${where} takes ${maxTypes === 0 ? 'no typed input' : 'one type, for its input'}`);
  }
  return c;
}

function plural(n) {
  return `${n} argument${n === 1 ? '' : 's'}`;
}

function invalidArguments(message) {
  return { tag: 'invalid-arguments', val: message };
}

/** Decodes JSON text and checks it against `type` (if declared); a misfit
 * throws a Failure with `code`. */
function decodeInput(text, type, code, what) {
  try {
    const value = parse(text);
    return type === undefined ? value : check(type, value);
  } catch (e) {
    throw new Failure(code, `${what} does not fit: ${messageOf(e)}`);
  }
}

async function runHook(h, ...args) {
  if (h === null) return;
  try {
    await h.fn(...args);
  } catch (e) {
    throw toWitFailure(e);
  }
}

function encodeResult(value) {
  try {
    return stringify(value);
  } catch (e) {
    throw new Failure('json', `the result could not be encoded as JSON: ${messageOf(e)}`);
  }
}

/**
 * Declares an actor. Every part is optional:
 *
 *     export default actor({
 *       migrate, create, wake, sleep, destroy,    // hooks
 *       queue: { policy: 'fifo', process, select },
 *       workflow: run,                            // async (ctx, input) => output
 *       connect, disconnect,                      // (id, params) and (id)
 *       http,                                     // async (request) => Response
 *       actions: { increment: [increment, 'integer'], get },
 *       internal: ['fire'],                       // or {actions: [...], fromActors: false}
 *     });
 *
 * An action (and `create`, `workflow` and `connect`) is a function, or
 * `[function, ...types]` to have its arguments (its input, its parameters)
 * checked: see the README for the types. A bare function gets as many
 * arguments as it declares parameters (`fn.length`), unchecked. Any of them
 * may be async.
 *
 * `internal` names actions that clients may not call: the host answers
 * them as for an action the actor does not have (`unknown-action`), before
 * the actor's code runs. The instance's schedules and the actor's own code
 * may call them, and other actors unless `fromActors: false`. `caller()`
 * tells an action who called it.
 */
export function actor(definition) {
  if (definition === null || typeof definition !== 'object') {
    throw new Error('actor() takes an object: {migrate, create, ..., actions}');
  }
  if (definition[EXPORTS]) return definition;
  for (const key of Object.keys(definition)) {
    if (!KEYS.has(key)) throw new Error(`actor(): unknown part ${JSON.stringify(key)}; the parts are ${[...KEYS].join(', ')}`);
  }
  const hooks = {
    migrate: hook(definition.migrate, 'migrate', 0),
    create: hook(definition.create, 'create', 1),
    wake: hook(definition.wake, 'wake', 0),
    sleep: hook(definition.sleep, 'sleep', 0),
    destroy: hook(definition.destroy, 'destroy', 0),
    connect: hook(definition.connect, 'connect', 1),
    disconnect: hook(definition.disconnect, 'disconnect', 0),
  };
  const actions = new Map();
  for (const [name, value] of Object.entries(definition.actions ?? {})) {
    const c = callable(value, `action ${JSON.stringify(name)}`);
    actions.set(name, { ...c, arity: c.types === null ? c.fn.length : c.types.length });
  }
  const internal = internalActions(definition.internal, actions);
  const queue = definition.queue ?? null;
  if (queue !== null) {
    if (typeof queue !== 'object' || typeof queue.process !== 'function') {
      throw new Error('queue must be {policy, process, select?}, with process a function');
    }
    if (typeof queue.policy !== 'function') witPolicy(queue.policy ?? 'fifo');
    if (queue.select !== undefined && typeof queue.select !== 'function') throw new Error('queue.select must be a function');
  }
  const workflow = definition.workflow === undefined ? null : callable(definition.workflow, 'workflow');
  if (workflow !== null && workflow.types !== null && workflow.types.length > 1) throw new Error('workflow takes one type, for its input');

  const guest = {
    migrate: () => runHook(hooks.migrate),
    async create(input) {
      if (hooks.create === null) return;
      let value;
      try {
        value = decodeInput(input, hooks.create.types?.[0], 'invalid-input', 'the create input');
      } catch (e) {
        throw toWitFailure(e);
      }
      await runHook(hooks.create, value);
    },
    wake: () => runHook(hooks.wake),
    sleep: () => runHook(hooks.sleep),
    destroy: () => runHook(hooks.destroy),
    async action(name, args) {
      let values;
      try {
        values = parse(args);
      } catch (e) {
        if (e instanceof SyntaxError) throw invalidArguments(`arguments are not valid JSON: ${messageOf(e)}`);
        throw { tag: 'failed', val: toWitFailure(e) };
      }
      if (!Array.isArray(values)) throw invalidArguments('arguments must be a JSON array');
      const entry = actions.get(name);
      if (entry === undefined) throw { tag: 'unknown-action', val: name };
      if (values.length !== entry.arity) {
        throw invalidArguments(`expected ${plural(entry.arity)}, got ${values.length}`);
      }
      if (entry.types !== null) {
        for (let i = 0; i < values.length; i++) {
          try {
            values[i] = check(entry.types[i], values[i]);
          } catch (e) {
            if (!(e instanceof TypeMismatch)) throw e;
            throw invalidArguments(`argument ${i + 1}: ${messageOf(e)}`);
          }
        }
      }
      let result;
      try {
        result = await entry.fn(...values);
        return encodeResult(result);
      } catch (e) {
        throw { tag: 'failed', val: toWitFailure(e) };
      }
    },
  };

  const processor = {
    async policy() {
      if (queue === null) return undefined;
      const policy = typeof queue.policy === 'function' ? await queue.policy() : queue.policy ?? 'fifo';
      return witPolicy(policy);
    },
    async process(event) {
      if (queue === null) throw { code: 'no-queue', message: 'this actor has no queue' };
      try {
        return encodeResult(await queue.process(eventFrom(event)));
      } catch (e) {
        throw toWitFailure(e);
      }
    },
    async select(pending) {
      if (queue === null || queue.select === undefined) return pending.length > 0 ? [pending[0].id] : [];
      const ids = await queue.select(pending.map(eventFrom));
      if (!Array.isArray(ids)) throw new TypeError('queue.select must return an array of event ids');
      return ids.map((id) => BigInt(id));
    },
  };

  const workflowRunner = {
    hasWorkflow: () => workflow !== null,
    async run(input) {
      if (workflow === null) return { tag: 'failed', val: { code: 'no-workflow', message: 'this actor has no workflow' } };
      return runWorkflow(workflow.fn, workflow.types?.[0], input);
    },
  };

  const connections = {
    async onConnect(id, params) {
      if (hooks.connect === null) return;
      let value;
      try {
        value = decodeInput(params, hooks.connect.types?.[0], 'invalid-params', 'the connection parameters');
      } catch (e) {
        throw toWitFailure(e);
      }
      await runHook(hooks.connect, Number(id), value);
    },
    onDisconnect: (id) => runHook(hooks.disconnect, Number(id)),
  };

  const access = {
    internal: () => ({ names: [...internal.names], fromActors: internal.fromActors }),
  };

  if (definition.http !== undefined && typeof definition.http !== 'function') throw new Error('http must be a function: (request) => Response');
  const incomingHandler = incomingHandlerOf(definition.http ?? null);

  return Object.freeze({ [EXPORTS]: true, guest, processor, workflowRunner, connections, access, incomingHandler });
}

/** The exports of a module's default export: an `actor()`, or a plain
 * definition. */
export function exportsOf(value) {
  if (value === undefined) {
    throw new Error('the actor module has no default export: end it with `export default actor({...})`');
  }
  return actor(value);
}

