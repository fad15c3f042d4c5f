"""The payment workflow (examples/payment in Python): charge the card at a
payment provider over HTTP with `try_step` (3 retries, the same
idempotency key in every attempt), then record the outcome in a second
step. A charge that fails for good is data, not a crash: the order goes to
manual review with the reason.

The provider is `scripts/provider.py` (on 127.0.0.1:9300, which the
manifest lets the actor reach): the card `4000 0000 0000 0002` is
declined, any other is charged.

`burrow create payment-py order-1 '{"order": "order-1"}'`, then
`burrow call payment-py order-1 get_state`.
"""

from dataclasses import dataclass

import burrow
from burrow import http, state, workflow


@dataclass
class Order:
    order: str
    card: str = "4242 4242 4242 4242"
    amount: int = 1200
    provider: str = "http://127.0.0.1:9300"


def create(order: Order):
    """Runs once, before the workflow starts: the order is pending."""
    state.set({"status": "pending", "reason": None, "charge": None})


def run(ctx, order: Order) -> str:
    charge = ctx.try_step("charge-card", lambda: charge_card(order), retries=3, backoff=(0.2, 5))

    @ctx.step("store-charge-result")
    def status():
        if charge.ok:
            payment = {"status": "paid", "reason": None, "charge": charge.value["id"]}
        else:
            payment = {"status": "manual-review", "reason": charge.failure.message, "charge": None}
        state.set(payment)
        return payment["status"]

    return status


def charge_card(order):
    """Charges the card at the provider, with the step's idempotency key: a
    retry (or a retry after a crash) is the same charge to the provider."""
    answer = http.post(
        f"{order.provider}/charges",
        json={"order": order.order, "amount": order.amount, "card": order.card},
        headers={"Idempotency-Key": workflow.step_key()},
        timeout_ms=5000,
    )
    if answer.status == 200:
        return answer.json()
    if answer.status == 402:
        raise burrow.Error("card-declined", answer.json()["message"])
    raise burrow.Error("provider", f"the provider answered {answer.status}: {answer.text()}")


def get_state():
    return state.get({"status": "pending", "reason": None, "charge": None})


burrow.actor(create=create, workflow=run, actions=[get_state])
