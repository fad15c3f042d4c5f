import { handler } from './host.mjs';

const DISPOSE = Symbol.dispose || Symbol.for('dispose');
const forward = handler('http', 'handle');

// The request and its options move into the call.
export function handle(request, options) {
  request[DISPOSE]();
  if (options !== undefined) options[DISPOSE]();
  return forward(request, options);
}
