// Who made the current call, for actions that admit or refuse by who asks.

import { who } from 'burrow:actor/caller@0.1.0';

/** Who made the running call: in an action, whoever called it; in the
 * `connect` hook, the connecting client; everywhere else the host. One of
 *
 *     { kind: 'client', identity: { name, role } }  // role: 'admin' or 'client'
 *     { kind: 'client', identity: null }            // the server checks no tokens
 *     { kind: 'actor', actor, key }                 // guest code of that instance
 *     { kind: 'schedule' }                          // one of this instance's schedules
 *     { kind: 'host' }                              // a hook, a queue event, a workflow
 */
export function caller() {
  return callerFrom(who());
}

/** The WIT variant `caller` as `caller()` returns it. */
export function callerFrom({ tag, val }) {
  switch (tag) {
    case 'client':
      return { kind: 'client', identity: val == null ? null : { name: val.name, role: val.role } };
    case 'actor':
      return { kind: 'actor', actor: val.actor, key: val.key };
    case 'schedule':
      return { kind: 'schedule' };
    default:
      return { kind: 'host' };
  }
}

/** A caller as the host writes it in JSON: `{"client": null}`,
 * `{"client": {"name", "role"}}`, `{"actor": {"actor", "key"}}`,
 * `"schedule"` or `"host"`. */
export function callerJson(c) {
  switch (c.kind) {
    case 'client':
      return { client: c.identity === null ? null : { name: c.identity.name, role: c.identity.role } };
    case 'actor':
      return { actor: { actor: c.actor, key: c.key } };
    default:
      return c.kind;
  }
}
