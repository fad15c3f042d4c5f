// The fake host: tests install a handler per import, `fake.db.execute =
// (sql, params) => ...`; an import without one throws. `fail(payload)`
// throws a WIT error the way componentize-js's bindings do.

export const fake = {};

export function reset() {
  for (const key of Object.keys(fake)) delete fake[key];
}

export function handler(iface, name) {
  return (...args) => {
    const f = fake[iface]?.[name];
    if (typeof f !== 'function') throw new Error(`the test did not fake ${iface}.${name}`);
    return f(...args);
  };
}

export class ComponentError extends Error {
  constructor(payload) {
    super('component error');
    Object.defineProperty(this, 'payload', { value: payload });
  }
}

export function fail(tag, val) {
  throw new ComponentError(val === undefined ? { tag } : { tag, val });
}
