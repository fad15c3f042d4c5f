// The payment workflow in JavaScript, like examples/payment: charge the
// card at a payment provider over HTTP with `tryStep` (3 retries, the same
// idempotency key in every attempt), then record the outcome in a second
// step. A charge that fails for good is data, not a crash: the order goes
// to manual review with the reason.
//
// The provider is `scripts/provider.py` (on 127.0.0.1:9300, which the
// manifest lets the actor reach): the card `4000 0000 0000 0002` is
// declined, any other is charged.
//
// `burrow create payment-js order-1 '{"order": "order-1"}'`,
// then `burrow call payment-js order-1 get_state`.

import { actor, state, Failure } from 'burrow-sdk';

/** Runs once, before the workflow starts: the order is pending. */
function create() {
  state.set({ status: 'pending', reason: null, charge: null });
}

async function run(ctx, order) {
  const retries = { retries: 3, backoffBase: 200, backoffCap: 5000 };
  const charge = await ctx.tryStep('charge-card', retries, () => chargeCard(ctx, order));
  return ctx.step('store-charge-result', () => {
    const payment = charge.ok
      ? { status: 'paid', reason: null, charge: charge.value.id }
      : { status: 'manual-review', reason: charge.failure.message, charge: null };
    state.set(payment);
    return payment.status;
  });
}

/** Charges the card at the provider, with the step's idempotency key: a
 * retry (or a retry after a crash) is the same charge to the provider. */
async function chargeCard(ctx, { order, card = '4242 4242 4242 4242', amount = 1200, provider = 'http://127.0.0.1:9300' }) {
  const answer = await fetch(`${provider}/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': ctx.stepKey },
    body: JSON.stringify({ order, amount, card }),
    timeoutMs: 5000,
  });
  if (answer.status === 200) return answer.json();
  if (answer.status === 402) throw new Failure('card-declined', (await answer.json()).message);
  throw new Failure('provider', `the provider answered ${answer.status}: ${await answer.text()}`);
}

const getState = () => state.get({ status: '', reason: null, charge: null });

const Order = { order: 'string', card: 'string?', amount: 'integer?', provider: 'string?' };

export default actor({
  create: [create, Order],
  workflow: [run, Order],
  actions: { get_state: getState },
});
