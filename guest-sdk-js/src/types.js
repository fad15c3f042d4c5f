// Checking JSON values against the types an actor declares for its action
// arguments, its create input, its workflow input and its connection
// parameters.
//
// A type is one of:
//   'integer'  a JSON integer in the i64 range (a Number, or a BigInt
//              beyond 2^53 - 1); not a bool, not 1.5
//   'number'   any JSON number
//   'string', 'boolean', 'array', 'object' (not null, not an array), 'any'
//   'T?'       the type T, or null (a missing object field counts as null)
//   [T]        an array whose items are all of type T
//   {k: T}     an object whose field k is of type T (other fields pass)

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const SCALARS = new Set(['integer', 'number', 'string', 'boolean', 'array', 'object', 'any']);

/** Why a value does not fit its type; `path` is where, inside the value. */
export class TypeMismatch extends Error {
  constructor(path, message) {
    super(path ? `${path}: ${message}` : message);
    this.path = path;
  }
}

/** Throws a plain Error if `spec` is not a type (checked when the actor is
 * declared, so a typo fails the build). */
export function validateType(spec, where) {
  if (typeof spec === 'string') {
    const base = spec.endsWith('?') ? spec.slice(0, -1) : spec;
    if (!SCALARS.has(base)) {
      throw new Error(`${where}: unknown type ${JSON.stringify(spec)}; use one of ${[...SCALARS].join(', ')} (with ? for null), [T] or {field: T}`);
    }
    return;
  }
  if (Array.isArray(spec)) {
    if (spec.length !== 1) throw new Error(`${where}: an array type has one item type, as in ['string']`);
    validateType(spec[0], `${where}[]`);
    return;
  }
  if (spec !== null && typeof spec === 'object') {
    for (const [field, type] of Object.entries(spec)) validateType(type, `${where}.${field}`);
    return;
  }
  throw new Error(`${where}: a type is a string such as 'integer', [T] or {field: T}, not ${String(spec)}`);
}

/** `value` if it is of type `spec`; otherwise throws a TypeMismatch. */
export function check(spec, value, path = '') {
  if (typeof spec === 'string') {
    if (spec.endsWith('?')) {
      if (value === null || value === undefined) return null;
      spec = spec.slice(0, -1);
    }
    return checkScalar(spec, value, path);
  }
  if (Array.isArray(spec)) {
    if (!Array.isArray(value)) throw mismatch(path, 'an array', value);
    return value.map((item, i) => check(spec[0], item, `${path}[${i}]`));
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw mismatch(path, 'an object', value);
  }
  for (const [field, type] of Object.entries(spec)) {
    const checked = check(type, value[field], `${path}.${field}`);
    if (field in value || checked !== null) value[field] = checked;
  }
  return value;
}

function checkScalar(spec, value, path) {
  switch (spec) {
    case 'any':
      if (value === undefined) throw mismatch(path, 'a value', value);
      return value;
    case 'integer':
      if (typeof value === 'bigint') {
        if (value < I64_MIN || value > I64_MAX) throw mismatch(path, 'an integer in the i64 range', value);
        return value;
      }
      if (typeof value === 'number' && Number.isInteger(value)) {
        if (!Number.isSafeInteger(value)) {
          throw new TypeMismatch(path, `expected an integer, found ${value}, beyond 2^53 - 1 where JavaScript numbers lose precision`);
        }
        return value;
      }
      throw mismatch(path, 'an integer', value);
    case 'number':
      if (typeof value === 'number') return value;
      if (typeof value === 'bigint') return Number(value);
      throw mismatch(path, 'a number', value);
    case 'string':
      if (typeof value === 'string') return value;
      throw mismatch(path, 'a string', value);
    case 'boolean':
      if (typeof value === 'boolean') return value;
      throw mismatch(path, 'a boolean', value);
    case 'array':
      if (Array.isArray(value)) return value;
      throw mismatch(path, 'an array', value);
    case 'object':
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value;
      throw mismatch(path, 'an object', value);
    default:
      throw new TypeMismatch(path, `unknown type ${spec}`);
  }
}

function mismatch(path, expected, value) {
  return new TypeMismatch(path, `expected ${expected}, found ${show(value)}`);
}

/** A short JSON-ish rendering of a value for an error message. */
export function show(value) {
  if (value === undefined) return 'nothing';
  if (typeof value === 'bigint') return value.toString();
  let text;
  try {
    text = JSON.stringify(value, (k, v) => (typeof v === 'bigint' ? v.toString() : v));
  } catch {
    text = String(value);
  }
  if (text === undefined) text = String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
