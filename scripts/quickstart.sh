#!/usr/bin/env bash
# Sets up Burrow, builds the example actors, starts the host on its embedded
# default (SQLite files under ./.burrow), calls the counter in Rust, Python
# and JavaScript, runs a 20-step workflow, runs the payment workflow in
# Rust, Python and JavaScript against a small local payment provider
# (scripts/provider.py: one card paid, one declined into manual review,
# through real HTTP requests), has the provider settle a payment through
# the actor's own HTTP handler (a webhook), sets a reminder, watches a
# chat room, transfers between two accounts, restarts the host and shows
# that the counts survived.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
echo "==> building burrow"
cargo build -p burrow
burrow=target/debug/burrow
echo "==> building the actors"
# Components that `scripts/test.sh` compiled already (its compile cache is
# target/tmp/compile-cache) need not be compiled again: a Python or
# JavaScript component takes the host about a minute. They go into the
# user's compile cache, which `burrow` uses; entries are named by the
# component's bytes and the engine, so a stale one is never used.
cache="${BURROW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/burrow}"
if [ -d target/tmp/compile-cache ]; then
    mkdir -p "$cache"
    cp -al -n target/tmp/compile-cache/. "$cache/" 2>/dev/null \
        || cp -a -n target/tmp/compile-cache/. "$cache/" 2>/dev/null || true
fi
"$burrow" build

url=http://127.0.0.1:7878
server=""
serve() {
    "$burrow" serve &
    server=$!
    # `burrow build` compiled the components into the cache, so this is quick.
    for _ in $(seq 1 1200); do
        curl -fsS "$url/healthz" >/dev/null 2>&1 && return
        kill -0 "$server" 2>/dev/null || { echo "burrow serve exited" >&2; exit 1; }
        sleep 0.1
    done
    echo "burrow serve did not start within 120 s" >&2
    exit 1
}
stop() {
    kill "$server"
    wait "$server"
}
# The payment provider the payment actors may reach (burrow.toml lists
# http://127.0.0.1:9300 for them).
provider_log=$(mktemp)
python3 scripts/provider.py --port 9300 >"$provider_log" &
provider=$!
trap 'kill "$server" "$provider" 2>/dev/null || true; rm -f "$provider_log"' EXIT
for _ in $(seq 1 100); do grep -q listening "$provider_log" && break; sleep 0.1; done
grep listening "$provider_log" || { echo "the payment provider did not start (is port 9300 taken?)" >&2; exit 1; }

serve
for actor in counter counter-py counter-js; do
    echo "==> $actor: increment(5), increment(2), get()"
    "$burrow" call "$actor" quickstart increment '[5]'
    curl -fsS -X POST "$url/actors/$actor/quickstart/actions/increment" -d '[2]'; echo
    "$burrow" call "$actor" quickstart get
done
workflow="quickstart-$(date +%s)"
echo "==> stepper: a workflow of 20 durable steps ($workflow)"
"$burrow" create stepper "$workflow" '{"steps": 20}'
for _ in $(seq 1 100); do
    "$burrow" inspect stepper "$workflow" --history | grep -q '"status": "completed"' && break
    sleep 0.1
done
"$burrow" inspect stepper "$workflow" --history | grep -E '^  "(status|output|history_len)"'
"$burrow" call stepper "$workflow" count

run=$(date +%s)
completed() {
    for _ in $(seq 1 300); do
        "$burrow" inspect "$1" "$2" --history | grep -q '"status": "completed"' && return
        sleep 0.1
    done
    echo "$1/$2 did not complete" >&2
    exit 1
}
for actor in payment payment-py payment-js; do
    echo "==> $actor: a paid order and a declined one ($run), charged at the provider"
    "$burrow" create "$actor" "paid-$run" "{\"order\": \"paid-$run\"}"
    "$burrow" create "$actor" "declined-$run" "{\"order\": \"declined-$run\", \"card\": \"4000 0000 0000 0002\"}"
    for key in "paid-$run" "declined-$run"; do
        # The declined card is retried 3 times with backoff first.
        completed "$actor" "$key"
        "$burrow" call "$actor" "$key" get_state
    done
done
echo "==> the provider's charges, and its requests per order (4 attempts of the declined card each)"
curl -fsS http://127.0.0.1:9300/charges; echo
curl -fsS http://127.0.0.1:9300/requests; echo

echo "==> payment: the provider settles by calling the actor's HTTP handler back (a webhook)"
hook="$url/actors/payment/settled-$run/http/settled"
"$burrow" create payment "settled-$run" "{\"order\": \"settled-$run\", \"callback\": \"$hook\"}"
"$burrow" inspect payment "settled-$run" --history | grep -E '^  "(status|waiting_on)"'
echo "a forged settlement is refused by the actor:"
curl -sS -X POST "$hook" -H 'x-signature: 00' -d '{"id": "ch_0", "status": "settled"}'; echo
completed payment "settled-$run"
"$burrow" call payment "settled-$run" get_state

echo "==> reminder: a schedule that fires once, 1 s from now"
"$burrow" call reminder "$run" remind '["stretch", 1000]'
"$burrow" call reminder "$run" pending
for _ in $(seq 1 50); do
    [ "$("$burrow" call reminder "$run" fired)" != "[]" ] && break
    sleep 0.1
done
"$burrow" call reminder "$run" fired

echo "==> chat-room: a client watches while a message is posted"
events=$(mktemp)
"$burrow" watch chat-room "$run" --params '{"name": "ada"}' >"$events" &
watcher=$!
for _ in $(seq 1 50); do grep -q joined "$events" && break; sleep 0.1; done
"$burrow" call chat-room "$run" post '["bob", "hello"]'
for _ in $(seq 1 50); do grep -q hello "$events" && break; sleep 0.1; done
kill "$watcher"
wait "$watcher" || true
echo "what the watcher printed:"
cat "$events"
rm -f "$events"

echo "==> account: a transfer is a call between two actors"
"$burrow" call account "alice-$run" deposit '[100]'
"$burrow" call account "alice-$run" transfer "[\"bob-$run\", 30]"
"$burrow" call account "bob-$run" balance
echo "==> restarting the host"
stop
serve
for actor in counter counter-py counter-js; do
    echo "==> $actor after the restart: get()"
    "$burrow" call "$actor" quickstart get
done
stop
echo "==> done; the data lives in ./.burrow (remove it to start over)"
