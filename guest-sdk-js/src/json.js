// JSON across the boundary: action arguments and results, payloads, state,
// workflow outputs.
//
// JavaScript numbers hold integers exactly only up to 2^53 - 1, and the host
// speaks i64. So integers beyond that decode as BigInt (where the engine
// shows JSON.parse the number's source text) and BigInt values encode as
// plain JSON integers. Byte arrays (Uint8Array, as blobs come back from the
// database) encode as arrays of numbers, like Rust's Vec<u8>.

const hasSource = (() => {
  let seen = false;
  try {
    JSON.parse('1', (key, value, context) => {
      seen = context !== undefined && context.source === '1';
      return value;
    });
  } catch {
    // An engine without the reviver's third argument.
  }
  return seen;
})();

function reviveBig(key, value, context) {
  if (typeof value === 'number' && !Number.isSafeInteger(value) && context !== undefined) {
    const text = context.source;
    if (typeof text === 'string' && /^-?\d+$/.test(text)) return BigInt(text);
  }
  return value;
}

/** Parses JSON text; integers beyond 2^53 - 1 become BigInt, exactly. */
export function parse(text) {
  if (hasSource) return JSON.parse(text, reviveBig);
  // Without the source text, JSON.parse rounds a long integer. Only text
  // with a run of 16 digits can hold one; it takes the slower path.
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  JSON.parse(text); // the engine's own syntax errors, first
  return new ExactParser(text).document();
}

const MAX_DEPTH = 512;
const SPACE = /[ \t\n\r]*/y;
const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;

/** A JSON parser that keeps long integers whole (text JSON.parse accepted). */
class ExactParser {
  constructor(text) {
    this.text = text;
    this.at = 0;
  }

  document() {
    const value = this.value(0);
    this.space();
    if (this.at !== this.text.length) this.fail();
    return value;
  }

  fail() {
    throw new SyntaxError(`unexpected input at position ${this.at}`);
  }

  space() {
    SPACE.lastIndex = this.at;
    SPACE.exec(this.text);
    this.at = SPACE.lastIndex;
  }

  match(re) {
    re.lastIndex = this.at;
    const m = re.exec(this.text);
    if (m === null) this.fail();
    this.at = re.lastIndex;
    return m;
  }

  value(depth) {
    if (depth > MAX_DEPTH) throw new SyntaxError('JSON nested too deeply');
    this.space();
    const c = this.text[this.at];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return JSON.parse(this.match(STRING)[0]);
    for (const [word, value] of [['true', true], ['false', false], ['null', null]]) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return value;
      }
    }
    const m = this.match(NUMBER);
    const n = Number(m[0]);
    return m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n) ? BigInt(m[0]) : n;
  }

  array(depth) {
    this.at++;
    const items = [];
    this.space();
    if (this.text[this.at] === ']') {
      this.at++;
      return items;
    }
    for (;;) {
      items.push(this.value(depth + 1));
      this.space();
      const c = this.text[this.at++];
      if (c === ']') return items;
      if (c !== ',') this.fail();
    }
  }

  object(depth) {
    this.at++;
    const object = {};
    this.space();
    if (this.text[this.at] === '}') {
      this.at++;
      return object;
    }
    for (;;) {
      this.space();
      const key = JSON.parse(this.match(STRING)[0]);
      this.space();
      if (this.text[this.at++] !== ':') this.fail();
      const value = this.value(depth + 1);
      Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
      this.space();
      const c = this.text[this.at++];
      if (c === '}') return object;
      if (c !== ',') this.fail();
    }
  }
}

const rawJson = typeof JSON.rawJSON === 'function' ? JSON.rawJSON : undefined;
const MARK = '\u0000burrow-bigint:';

function replace(key, value) {
  if (typeof value === 'bigint') return rawJson ? rawJson(value.toString()) : MARK + value.toString();
  if (value instanceof Uint8Array) return Array.from(value);
  return value;
}

/** Encodes a value as JSON text; `undefined` (a function that returned
 * nothing) is `null`. Throws a TypeError for what JSON cannot hold (a
 * cycle). */
export function stringify(value) {
  const text = JSON.stringify(value, replace);
  if (text === undefined) return 'null';
  if (rawJson || !text.includes('burrow-bigint:')) return text;
  return text.replace(/"\\u0000burrow-bigint:(-?\d+)"/g, '$1');
}
