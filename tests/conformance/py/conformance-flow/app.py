"""The conformance suite's workflow actor in Python: one scenario per create
input. tests/conformance/SPEC.md says what each scenario does.
"""

import time

import burrow
from burrow import actors, db, events, http, queue, schedule, state, workflow
from burrow.workflow import Break, Continue

ME = "conformance-flow-py"


def migrate():
    db.execute_batch(
        """CREATE TABLE IF NOT EXISTS applied (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);
           CREATE TABLE IF NOT EXISTS undone (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);"""
    )


def apply(name):
    db.execute("INSERT INTO applied (name) VALUES (?)", [name])


def applying(name, output=None):
    def body():
        apply(name)
        return output

    return body


def applied() -> list[str]:
    return [row[0] for row in db.query("SELECT name FROM applied ORDER BY seq")]


def undone() -> list[str]:
    return [row[0] for row in db.query("SELECT name FROM undone ORDER BY seq")]


def get_state():
    return state.get()


def run(ctx, input: dict | None):
    if input is None:
        return None
    scenario = SCENARIOS[input["scenario"]]
    return scenario(ctx, input)


def steps(ctx, input):
    count, step_ms, pause_ms = input["count"], input.get("step_ms"), input.get("pause_ms")
    version = ctx.version("v", 2)
    for i in range(count):
        if i == count // 2 and pause_ms is not None:
            ctx.sleep("pause", pause_ms / 1000)

        @ctx.step(f"step-{i}")
        def _():
            apply(f"step-{i}")
            if step_ms:
                begun = time.monotonic()
                while time.monotonic() - begun < step_ms / 1000:
                    pass
            return i

    return {"count": count, "version": version}


OUTSIDE = [
    ("db.execute", lambda: db.execute("INSERT INTO applied (name) VALUES ('outside')")),
    ("db.execute-batch", lambda: db.execute_batch("DELETE FROM applied")),
    ("state.get", lambda: state.get()),
    ("state.set", lambda: state.set({"outside": True})),
    ("queue.append", lambda: queue.append("x", None)),
    ("schedule.after", lambda: schedule.after(10, "applied")),
    ("schedule.at", lambda: schedule.at(0, "applied")),
    ("schedule.every", lambda: schedule.every(1000, "applied")),
    ("schedule.pending", lambda: schedule.pending()),
    ("schedule.cancel", lambda: schedule.cancel(1)),
    ("actors.call", lambda: actors.call(ME, "other", "applied")),
    ("actors.send", lambda: actors.send(ME, "other", "x", None)),
    ("events.broadcast", lambda: events.broadcast("x", None)),
]


def outside(ctx, input):
    attempts = []
    for call, attempt in OUTSIDE:
        try:
            attempt()
            attempts.append({"call": call, "error": "allowed", "message": ""})
        except burrow.NotInStep as e:
            attempts.append({"call": call, "error": "not-in-step", "message": e.message})
        except Exception as e:
            attempts.append({"call": call, "error": repr(e), "message": str(e)})

    @ctx.step("inside")
    def _():
        state.set({"inside": True})
        apply("inside")

    return {"outside": attempts}


def outgoing(ctx, input):
    url = input["url"]
    try:
        answer = http.get(url)
        outside = {"error": "allowed", "message": "", "status": answer.status}
    except burrow.NotInStep as e:
        outside = {"error": "not-in-step", "message": e.message}
    except Exception as e:
        outside = {"error": repr(e), "message": str(e)}
    key_outside = workflow.step_key()

    @ctx.step("charge")
    def charge():
        key = workflow.step_key()
        answer = http.post(url, json={"amount": 1200}, headers={"Idempotency-Key": key})
        if not answer.ok:
            raise burrow.Error("charge", f"status {answer.status}")
        return {"key": key, "status": answer.status, "body": answer.text()}

    return {"outside": outside, "key_outside": key_outside, "charge": charge}


def try_step(ctx, input):
    def declined_body():
        apply("declined")
        raise burrow.Error("declined", "card declined")

    def critical_body():
        raise burrow.Error("fatal", "no retry", critical=True)

    def slow_body():
        while True:
            pass

    declined = ctx.try_step("declined", declined_body, retries=2, backoff=(0.01, 0.05))
    critical = ctx.try_step("critical", critical_body)
    timeout = ctx.try_step("slow", slow_body, retries=0, timeout=0.2)
    fine = ctx.try_step("fine", lambda: "fine")

    def block(ctx):
        a = ctx.step("block-a", applying("block-a", 1))

        def nope():
            raise burrow.Error("nope", "block failed")

        ctx.step("block-b", nope, retries=0)
        ctx.step("block-c", applying("block-c"))
        return a

    blocked = ctx.try_block(block)
    ctx.step("after", applying("after"))
    return {
        "declined": declined.to_dict(),
        "critical": critical.to_dict(),
        "timeout": timeout.to_dict(),
        "fine": fine.to_dict(),
        "block": blocked.to_dict(),
    }


def undo(name):
    def handler(output):
        db.execute("INSERT INTO undone (name) VALUES (?)", [f"{name}:{output}"])

    return handler


def rollback(ctx, input):
    ctx.step_with_rollback("reserve", applying("reserve", "r1"), undo("reserve"))
    ctx.rollback_checkpoint("reserved")
    ctx.step_with_rollback("charge", applying("charge", "c1"), undo("charge"))
    ctx.step_with_rollback("ship", applying("ship", "s1"), undo("ship"))

    def confirm():
        raise burrow.Error("out-of-stock", "nothing left", rollback=True)

    ctx.step("confirm", confirm)


def loop(ctx, input):
    n = input["iterations"]

    def body(ctx, s):
        if s["i"] == n:
            return Break(s["sum"])
        value = ctx.step("add", applying(f"add-{s['i']}", s["i"]))
        return Continue({"i": s["i"] + 1, "sum": s["sum"] + value})

    return {"sum": ctx.repeat("count", {"i": 0, "sum": 0}, body)}


def sleep(ctx, input):
    ctx.step("before", applying("before"))
    start = ctx.now()
    ctx.sleep("nap", input["ms"] / 1000)
    end = ctx.now()
    ctx.step("after", applying("after"))
    return {"from": start, "to": end}


def join_race(ctx, input):
    def a(ctx):
        ctx.step("a1", applying("a1", "a"))
        ctx.sleep("a-nap", 0.1)
        ctx.step("a2", applying("a2", "a"))
        return "a"

    def b(ctx):
        return ctx.step("b1", applying("b1", "b"))

    joined = ctx.join("both", [a, b])

    def slow(ctx):
        ctx.sleep("slow-nap", 60)
        return ctx.step("slow", applying("slow", "slow"))

    def fast(ctx):
        return ctx.step("fast", applying("fast", "fast"))

    winner, value = ctx.race("first", [slow, fast])
    return {"join": joined, "race": {"winner": winner, "value": value}}


def queue_waits(ctx, input):
    go = ctx.next_event("go", ["go"])
    pings = ctx.next_batch("pings", ["ping"], 10)
    none = ctx.next_event("none", ["never"], timeout=0.05)
    return {
        "go": go.payload if go else None,
        "pings": [e.payload for e in pings],
        "none": none.payload if none else None,
    }


SCENARIOS = {
    "steps": steps,
    "outside": outside,
    "try-step": try_step,
    "rollback": rollback,
    "loop": loop,
    "sleep": sleep,
    "join-race": join_race,
    "events": queue_waits,
    "http": outgoing,
}

burrow.action(get_state, name="state")
burrow.actor(migrate=migrate, workflow=run, actions=[applied, undone])
