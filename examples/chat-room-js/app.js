// A chat room in JavaScript, like examples/chat-room: the connect hook
// admits a client that connects with a name and broadcasts `joined`, the
// disconnect hook broadcasts `left`, and `post` stores a message and
// broadcasts it once it has committed (a rolled-back message is never
// seen). `burrow watch chat-room-js lobby --params '{"name": "ada"}'`.

import { actor, db, events, Failure } from 'burrow-sdk';

const MAX_NAME = 64; // bytes
const MAX_TEXT = 4000; // bytes
const MAX_HISTORY = 100;

const bytes = (text) => new TextEncoder().encode(text).length;
const validName = (name) => typeof name === 'string' && name.trim() !== '' && bytes(name) <= MAX_NAME;

function migrate() {
  db.executeBatch(`
    CREATE TABLE IF NOT EXISTS messages (
        id INTEGER PRIMARY KEY, author TEXT NOT NULL, text TEXT NOT NULL, at INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS members (connection INTEGER PRIMARY KEY, name TEXT NOT NULL);`);
}

/** An instance with live connections stays awake, so one that wakes has none. */
const wake = () => db.execute('DELETE FROM members');

function join(connection, params) {
  if (!validName(params?.name)) {
    throw new Failure('name-required', `connect with a name of 1 to ${MAX_NAME} bytes: {"name": "ada"}`);
  }
  db.execute('INSERT INTO members (connection, name) VALUES (?, ?)', [connection, params.name]);
  events.broadcast('joined', { name: params.name });
}

function leave(connection) {
  const [row] = db.query('DELETE FROM members WHERE connection = ? RETURNING name', [connection]);
  if (row) events.broadcast('left', { name: row.name });
}

/** Posts a message and sends it to every connected client; returns its id. */
function post(author, text) {
  if (!validName(author)) throw new Failure('name-required', `the author needs a name of 1 to ${MAX_NAME} bytes`);
  if (text.trim() === '') throw new Failure('empty-message', 'the message is empty');
  if (bytes(text) > MAX_TEXT) {
    throw new Failure('message-too-long', `the message has ${bytes(text)} bytes, more than ${MAX_TEXT}`);
  }
  const at = Date.now();
  const id = db.queryValue('INSERT INTO messages (author, text, at) VALUES (?, ?, ?) RETURNING id', [author, text, at]);
  events.broadcast('message', { id, author, text, at });
  return id;
}

/** The newest `limit` messages (at most 100), oldest first. */
const history = (limit) =>
  db.query(
    `SELECT id, author, text, at FROM (SELECT * FROM messages ORDER BY id DESC LIMIT ?) ORDER BY id`,
    [Math.max(0, Math.min(limit, MAX_HISTORY))],
  );

/** The names of the connected members, sorted, one per connection. */
const members = () => db.query('SELECT name FROM members ORDER BY name').map((row) => row.name);

export default actor({
  migrate,
  wake,
  connect: join,
  disconnect: leave,
  actions: { post: [post, 'string', 'string'], history: [history, 'integer'], members },
});
