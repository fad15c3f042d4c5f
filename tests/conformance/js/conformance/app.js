// The conformance actor `conformance-js`, exactly as tests/conformance/SPEC.md
// describes it: the counter, argument checks, state, database errors, the
// queue under every policy, schedules, broadcasts and calls to other actors.

import { actor, actors, caller, callerJson, db, events, queue, schedule, state, Failure, HttpError, NotInStepError } from 'burrow-sdk';

const POLICIES = ['fifo', 'lifo', 'random', 'custom'];

function migrate() {
  db.executeBatch(`
    CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
    INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);
    CREATE TABLE IF NOT EXISTS config (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS processed (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        event INTEGER NOT NULL,
        type TEXT NOT NULL,
        label TEXT NOT NULL,
        priority INTEGER NOT NULL,
        grp TEXT,
        attempt INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS notes (seq INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS members (connection INTEGER PRIMARY KEY, name TEXT NOT NULL);`);
}

function create(input) {
  if (input === null) return;
  const keys = input !== null && typeof input === 'object' && !Array.isArray(input) ? Object.keys(input) : [];
  if (keys.length !== 1 || keys[0] !== 'policy' || !POLICIES.includes(input.policy)) {
    throw new Failure('invalid-input', `expected null or {"policy": ${POLICIES.join(' | ')}}`);
  }
  db.execute("INSERT INTO config (name, value) VALUES ('policy', ?)", [input.policy]);
}

const wake = () => db.execute('DELETE FROM members');

function connect(id, params) {
  const name = params?.name;
  if (typeof name !== 'string' || name === '' || new TextEncoder().encode(name).length > 64) {
    throw new Failure('name-required', 'connect with {"name": "<1 to 64 bytes>"}');
  }
  db.execute('INSERT INTO members (connection, name) VALUES (?, ?)', [id, name]);
  events.broadcast('joined', { name });
}

function disconnect(id) {
  const [row] = db.query('DELETE FROM members WHERE connection = ? RETURNING name', [id]);
  if (row) events.broadcast('left', { name: row.name });
}

function policy() {
  const [row] = db.query("SELECT value FROM config WHERE name = 'policy'");
  return { mode: row?.value ?? 'fifo', concurrency: 1 };
}

function process(event) {
  const { label, fail = 0 } = event.payload;
  db.execute('INSERT INTO processed (event, type, label, priority, grp, attempt) VALUES (?, ?, ?, ?, ?, ?)', [
    event.id,
    event.type,
    label,
    event.priority,
    event.group,
    event.attempt,
  ]);
  if (event.attempt <= fail) throw new Failure('planned-failure', `event ${label} failed attempt ${event.attempt}`);
  return { label, attempt: event.attempt };
}

/** Compares strings by code points (JavaScript's `<` compares UTF-16 units). */
function byCodePoints(a, b) {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function select(pending) {
  const [first] = [...pending].sort((a, b) => byCodePoints(a.payload.label, b.payload.label) || a.id - b.id);
  return first ? [first.id] : [];
}

const UPDATE = 'UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value';
const increment = (amount) => db.queryValue(UPDATE, [amount]);
const get = () => db.queryValue('SELECT value FROM counter WHERE id = 1');

function addThenFail(amount) {
  db.queryValue(UPDATE, [amount]);
  throw new Failure('planned', `added ${amount}, then failed`);
}

function addThenCrash(amount) {
  db.queryValue(UPDATE, [amount]);
  const missing = undefined;
  return missing();
}

const echo = (i, f, s, b, l, o) => [i, f, s, b, l, o];

function bump(name) {
  return state.update((counters) => {
    counters[name] = (counters[name] ?? 0) + 1;
  }, {})[name];
}

function rows() {
  const [row] = db.query("SELECT 1 AS one, 'two' AS two, NULL AS three, 2.5 AS four, x'00ff' AS five");
  return [row[0], row.two, row.three, row.four, Array.from(row.five), row.one];
}

const FAILING = {
  'invalid-sql': ['SELEC 1', [], db.InvalidSqlError],
  constraint: ['INSERT INTO counter (id, value) VALUES (1, 0)', [], db.ConstraintError],
  denied: ['SELECT * FROM _burrow_state', [], db.DeniedError],
  'invalid-parameters': ['SELECT ?', [], db.InvalidParametersError],
};

function dbError(kind) {
  const failing = FAILING[kind];
  if (!failing) throw new Failure('unknown-kind', `no statement fails with ${kind}`);
  const [sql, params, type] = failing;
  try {
    db.query(sql, params);
  } catch (e) {
    if (e instanceof type) return kind;
    return `other: ${e?.name}: ${e?.message}`;
  }
  return 'other: nothing was raised';
}

const dbUncaught = () => db.query('SELEC 1');

const enqueue = (type, payload, priority, group) => queue.append(type, payload, { priority, group });
const enqueueMany = (list) => list.map((e) => queue.append(e.type, e.payload, { priority: e.priority ?? 0, group: e.group }));

const processed = () =>
  db
    .query('SELECT label, attempt, priority, grp FROM processed ORDER BY seq')
    .map(({ label, attempt, priority, grp }) => ({ label, attempt, priority, group: grp }));

const scheduleNote = (note, delayMs) => schedule.after(delayMs, 'note', [note]);
const note = (text) => {
  db.execute('INSERT INTO notes (note) VALUES (?)', [text]);
  return null;
};
const notes = () => db.query('SELECT note FROM notes ORDER BY seq').map((row) => row.note);
const schedules = () => schedule.pending().map(({ id, action, args }) => ({ id, action, args }));
const cancel = (id) => schedule.cancel(id);

const say = (text) => {
  events.broadcast('said', { text });
  return null;
};
function sayThenFail(text) {
  events.broadcast('said', { text });
  throw new Failure('planned', `said ${text}, then failed`);
}
const members = () => db.query('SELECT name FROM members ORDER BY name').map((row) => row.name);

const relay = (actorName, key, action, args) => actors.call(actorName, key, action, args);
const relaySend = (actorName, key, type, payload) => actors.send(actorName, key, type, payload);

const whoami = () => callerJson(caller());
const secret = (text) => {
  const c = caller();
  db.execute('INSERT INTO notes (note) VALUES (?)', [`${text} from ${c.kind}`]);
  return callerJson(c);
};
const scheduleSecret = (text, delayMs) => schedule.after(delayMs, 'secret', [text]);

// A GET with the global fetch: the status and body, or the SDK's error by
// its type and the host's text.
async function httpGet(url) {
  try {
    const answer = await fetch(url);
    return { status: answer.status, body: await answer.text() };
  } catch (e) {
    if (e instanceof NotInStepError) return { error: 'not-in-step', message: e.message };
    if (e instanceof HttpError) return { error: e.kind, message: e.message };
    return { error: `${e?.name}: ${e?.message}`, message: String(e?.message ?? '') };
  }
}

// The HTTP handler: counts one, then answers 201 with the count and what
// came; `/fail` counts, then throws (the count is rolled back).
async function hook(request) {
  const count = increment(1);
  const url = new URL(request.url);
  if (url.pathname === '/fail') throw new Failure('planned', 'counted, then failed');
  return Response.json(
    {
      count,
      method: request.method,
      path: url.pathname + url.search,
      body: await request.text(),
      signature: request.headers.get('x-signature'),
    },
    { status: 201, headers: { 'x-conformance': 'yes' } },
  );
}

export default actor({
  migrate,
  create: [create, 'any'],
  wake,
  queue: { policy, process, select },
  connect,
  disconnect,
  http: hook,
  actions: {
    increment: [increment, 'integer'],
    get,
    add_then_fail: [addThenFail, 'integer'],
    add_then_crash: [addThenCrash, 'integer'],
    echo: [echo, 'integer', 'number', 'string', 'boolean', ['integer'], 'any'],
    bump: [bump, 'string'],
    state: () => state.get(null),
    rows,
    db_error: [dbError, 'string'],
    db_uncaught: dbUncaught,
    enqueue: [enqueue, 'string', 'any', 'integer', 'string?'],
    enqueue_many: [enqueueMany, [{ type: 'string', payload: 'any', priority: 'integer?', group: 'string?' }]],
    processed,
    schedule_note: [scheduleNote, 'string', 'integer'],
    note: [note, 'string'],
    notes,
    schedules,
    cancel: [cancel, 'integer'],
    say: [say, 'string'],
    say_then_fail: [sayThenFail, 'string'],
    members,
    relay: [relay, 'string', 'string', 'string', 'array'],
    relay_send: [relaySend, 'string', 'string', 'string', 'any'],
    whoami,
    secret: [secret, 'string'],
    schedule_secret: [scheduleSecret, 'string', 'integer'],
    http_get: [httpGet, 'string'],
  },
  internal: { actions: ['secret'], fromActors: false },
});
