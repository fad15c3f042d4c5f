// The instance's own SQLite database. Every statement runs inside the
// transaction of the current call, so an action's writes commit together
// or not at all.
//
// Parameters are plain JavaScript values: null or undefined (NULL), a
// number (INTEGER if it is an integer, else REAL), a BigInt (INTEGER), a
// string (TEXT), a boolean (INTEGER 0 or 1), a Uint8Array or ArrayBuffer
// (BLOB). Results come back the same way: INTEGER as a number (a BigInt
// beyond 2^53 - 1), REAL as a number, TEXT as a string, BLOB as a
// Uint8Array, NULL as null.

import { execute as witExecute, executeBatch as witExecuteBatch } from 'burrow:actor/db@0.1.0';
import { Failure, InvalidParametersError, dbError, guard } from './errors.js';

const VALUES = Symbol('values');

function toValue(value, index) {
  switch (typeof value) {
    case 'undefined':
      return { tag: 'null' };
    case 'number':
      return Number.isInteger(value) ? { tag: 'integer', val: BigInt(value) } : { tag: 'real', val: value };
    case 'bigint':
      return { tag: 'integer', val: value };
    case 'string':
      return { tag: 'text', val: value };
    case 'boolean':
      return { tag: 'integer', val: value ? 1n : 0n };
    default:
      if (value === null) return { tag: 'null' };
      if (value instanceof Uint8Array) return { tag: 'blob', val: value };
      if (value instanceof ArrayBuffer) return { tag: 'blob', val: new Uint8Array(value) };
      if (ArrayBuffer.isView(value)) {
        return { tag: 'blob', val: new Uint8Array(value.buffer, value.byteOffset, value.byteLength) };
      }
      throw new InvalidParametersError(
        'invalid-parameters',
        `parameter ${index + 1} is ${Array.isArray(value) ? 'an array' : `a ${typeof value}`}; ` +
          'bind null, a number, a BigInt, a string, a boolean or a Uint8Array',
      );
  }
}

function fromValue({ tag, val }) {
  switch (tag) {
    case 'integer':
      return val >= -9007199254740991n && val <= 9007199254740991n ? Number(val) : val;
    case 'null':
      return null;
    default:
      return val;
  }
}

function run(sql, params) {
  if (!Array.isArray(params)) {
    throw new InvalidParametersError('invalid-parameters', 'the parameters must be an array');
  }
  const values = params.map(toValue);
  return guard(() => witExecute(String(sql), values), dbError);
}

// Rows are plain objects keyed by column name (what JSON.stringify and
// spreading see), and their values are also reachable by position,
// `row[0]`, through a prototype shared by the rows of one statement.
function rowPrototype(columns) {
  const proto = {};
  for (let i = 0; i < columns.length; i++) {
    Object.defineProperty(proto, i, {
      get() {
        return this[VALUES][i];
      },
    });
  }
  return proto;
}

function makeRow(proto, columns, raw) {
  const row = Object.create(proto);
  const values = raw.map(fromValue);
  Object.defineProperty(row, VALUES, { value: values });
  for (let i = 0; i < columns.length; i++) {
    if (columns[i] === '__proto__') {
      Object.defineProperty(row, '__proto__', { value: values[i], enumerable: true, writable: true, configurable: true });
    } else {
      row[columns[i]] = values[i];
    }
  }
  return row;
}

/** The values of a row, in column order (also for rows whose columns share
 * a name). */
export function valuesOf(row) {
  return row[VALUES];
}

/**
 * Runs one statement and returns its rows: an array of plain objects keyed
 * by column name, whose values are also reachable by position (`row[0]`).
 * The array also carries `columns`, `changes` (rows changed by an INSERT,
 * UPDATE or DELETE) and `lastInsertRowid`.
 */
export function query(sql, params = []) {
  const result = run(sql, params);
  const columns = result.columns;
  const proto = rowPrototype(columns);
  const rows = result.rows.map((raw) => makeRow(proto, columns, raw));
  Object.defineProperties(rows, {
    columns: { value: columns },
    changes: { value: Number(result.changes) },
    lastInsertRowid: { value: fromValue({ tag: 'integer', val: result.lastInsertRowid }) },
  });
  return rows;
}

/** Runs one statement and returns its first row; throws a Failure with
 * code `no-rows` if it returned none. */
export function queryOne(sql, params = []) {
  const rows = query(sql, params);
  if (rows.length === 0) throw new Failure('no-rows', `the statement returned no rows: ${sql}`);
  return rows[0];
}

/** Runs one statement and returns the first column of its first row (code
 * `no-rows` if it returned none). */
export function queryValue(sql, params = []) {
  return valuesOf(queryOne(sql, params))[0];
}

/** Runs one statement and returns the number of rows it changed. */
export function execute(sql, params = []) {
  return Number(run(sql, params).changes);
}

/** Runs several statements separated by `;`, without parameters. */
export function executeBatch(sql) {
  guard(() => witExecuteBatch(String(sql)), dbError);
}

export {
  DbError,
  InvalidSqlError,
  ConstraintError,
  DeniedError,
  LimitExceededError,
  InvalidParametersError,
  NotAllowedError,
  OtherDbError,
} from './errors.js';
