// Events for the clients connected to this instance (over a WebSocket,
// `burrow watch`, or burrow-client's `subscribe`).

import { broadcast as witBroadcast } from 'burrow:actor/events@0.1.0';
import { CapabilityError, guard } from './errors.js';
import { stringify } from './json.js';

/** Sends the event `name` with `payload` (anything JSON can hold) to every
 * connected client once the current call commits; nothing is sent if it
 * rolls back. */
export function broadcast(name, payload = null) {
  const json = stringify(payload);
  guard(
    () => witBroadcast(String(name), json),
    ({ tag, val }) => new CapabilityError('events', tag, String(val)),
  );
}
