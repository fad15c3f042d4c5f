// The payment workflow in JavaScript, like examples/payment: charge the
// card with `tryStep` (3 retries), then record the outcome in a second
// step. A charge that fails for good is data, not a crash: the order goes
// to manual review with the reason.
//
// `burrow create payment-js order-1 '{"order": "order-1", "declined": false}'`,
// then `burrow call payment-js order-1 get_state`.

import { actor, state, Failure } from 'burrow-sdk';

/** Runs once, before the workflow starts: the order is pending. */
function create() {
  state.set({ status: 'pending', reason: null, charge: null });
}

async function run(ctx, { order, declined = false }) {
  const retries = { retries: 3, backoffBase: 200, backoffCap: 5000 };
  const charge = await ctx.tryStep('charge-card', retries, () => chargeCard(order, declined));
  return ctx.step('store-charge-result', () => {
    const payment = charge.ok
      ? { status: 'paid', reason: null, charge: charge.value }
      : { status: 'manual-review', reason: charge.failure.message, charge: null };
    state.set(payment);
    return payment.status;
  });
}

/** Stands in for a payment provider. */
function chargeCard(order, declined) {
  if (declined) throw new Failure('card-declined', `the card for ${order} was declined`);
  return `charge-${order}`;
}

const getState = () => state.get({ status: '', reason: null, charge: null });

const Order = { order: 'string', declined: 'boolean?' };

export default actor({
  create: [create, Order],
  workflow: [run, Order],
  actions: { get_state: getState },
});
