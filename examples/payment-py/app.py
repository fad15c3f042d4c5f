"""The payment workflow (examples/payment in Python): charge the card with
`try_step` (3 retries), then record the outcome in a second step. A charge
that fails for good is data, not a crash: the order goes to manual review
with the reason.

`burrow create payment-py order-1 '{"order": "order-1", "declined": false}'`,
then `burrow call payment-py order-1 get_state`.
"""

from dataclasses import dataclass

import burrow
from burrow import state


@dataclass
class Order:
    order: str
    declined: bool = False


def create(order: Order):
    """Runs once, before the workflow starts: the order is pending."""
    state.set({"status": "pending", "reason": None, "charge": None})


def run(ctx, order: Order) -> str:
    charge = ctx.try_step(
        "charge-card", lambda: charge_card(order.order, order.declined), retries=3, backoff=(0.2, 5)
    )

    @ctx.step("store-charge-result")
    def status():
        if charge.ok:
            payment = {"status": "paid", "reason": None, "charge": charge.value}
        else:
            payment = {"status": "manual-review", "reason": charge.failure.message, "charge": None}
        state.set(payment)
        return payment["status"]

    return status


def charge_card(order, declined):
    """Stands in for a payment provider."""
    if declined:
        raise burrow.Error("card-declined", f"the card for {order} was declined")
    return f"charge-{order}"


def get_state():
    return state.get({"status": "pending", "reason": None, "charge": None})


burrow.actor(create=create, workflow=run, actions=[get_state])
