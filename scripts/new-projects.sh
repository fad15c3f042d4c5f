#!/usr/bin/env bash
# A newcomer's path, outside the repository: installs `burrow` with
# `cargo install --path cli` into a temporary root, packs the SDKs (the
# Rust one by the checkout's git URL, the Python one as a wheel installed
# into a fresh virtual environment, the JavaScript one as an `npm pack`
# tarball), then for each language and template creates a project with
# `burrow new` in a temporary folder, builds it, runs its own test
# (`cargo test`, `python -m unittest`, `npm test`), serves it and calls it;
# each counter also runs under `burrow dev` while its source changes.
#
#   scripts/new-projects.sh [LANG...]     # default: rust python js
#
# Nothing in the projects reads a file of the repository by path.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
langs=("$@")
[ ${#langs[@]} -gt 0 ] || langs=(rust python js)
templates=(counter workflow queue)

work=$(mktemp -d -t burrow-new-XXXXXX)
server=""
url=""
cleanup() {
    [ -z "$server" ] || kill "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "==> installing burrow into $work/install"
# --debug with the workspace's target folder: what this builds,
# `cargo build -p burrow` (README, scripts/quickstart.sh) finds built.
# After `cargo test --workspace` it builds only Burrow's own crates again
# (burrow-storage, which the tests build with its `testing` feature, and
# the crates above it): the dependencies' features are the same in both
# builds, through workspace-hack/.
cargo install --quiet --locked --debug --path "$repo/cli" --root "$work/install" \
    --target-dir "$repo/target"
export PATH="$work/install/bin:$PATH"
unset BURROW_DATA_DIR BURROW_MANIFEST BURROW_URL

# Where each SDK comes from. Cargo fetches the Rust SDK from the checkout
# by git: what is committed, not what is being edited.
sdk_for() {
    case "$1" in
        rust) echo "file://$repo" ;;
        python)
            python3 -m pip wheel --quiet --disable-pip-version-check --no-deps \
                "$repo/guest-sdk-py" -w "$work/wheels" >&2
            ls "$work"/wheels/burrow_sdk-*.whl
            ;;
        js)
            (cd "$repo/guest-sdk-js" && npm pack --silent --pack-destination "$work" >/dev/null)
            ls "$work"/burrow-sdk-*.tgz
            ;;
    esac
}

# Starts `burrow SUBCOMMAND` (serve or dev) for the project in the current
# folder on the new data directory DATA, on a free port, and waits until
# every actor is ready, saying how long that took; sets `server` (its pid)
# and `url`.
start_server() {
    local subcommand=$1 data=$2 port started
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    url="http://127.0.0.1:$port"
    started=$EPOCHREALTIME
    BURROW_DATA_DIR="$data" burrow "$subcommand" --listen "127.0.0.1:$port" &
    server=$!
    for _ in $(seq 1 1200); do
        if curl -fsS "$url/readyz" >/dev/null 2>&1; then
            echo "$(basename "$PWD"): burrow $subcommand ready on a new data directory in $(awk "BEGIN { printf \"%.2f\", $EPOCHREALTIME - $started }") s"
            return
        fi
        kill -0 "$server" 2>/dev/null || { echo "burrow $subcommand exited" >&2; exit 1; }
        sleep 0.05
    done
    echo "burrow $subcommand was not ready within 60 s" >&2
    exit 1
}

stop_server() {
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=""
}

# Serves the project in the current folder on a new data directory and
# uses its actor over HTTP. The component compiled for the project's test
# is in the user's compile cache: the actor is ready at once.
serve_and_call() {
    local name=$1 template=$2 got want
    start_server serve "$work/data-$name"
    case "$template" in
        counter)
            burrow call --url "$url" "$name" served increment '[5]' >/dev/null
            got=$(burrow call --url "$url" "$name" served increment '[2]')
            want=7
            ;;
        workflow)
            burrow create --url "$url" "$name" served '{"steps": 2}'
            want=3
            for _ in $(seq 1 100); do
                got=$(burrow call --url "$url" "$name" served count)
                [ "$got" = "$want" ] && break
                sleep 0.1
            done
            ;;
        queue)
            got=$(burrow send --url "$url" "$name" served job '{"text": "served"}' --wait)
            want=SERVED
            ;;
    esac
    [ "$got" = "$want" ] || { echo "$name answered $got over HTTP, not $want" >&2; exit 1; }
    stop_server
}

# Runs the counter project in the current folder under `burrow dev`,
# changes its source (`increment` adds twice the amount) and waits for the
# new code to answer.
dev_redeploys() {
    local name=$1 source=$2 before after redeployed=""
    start_server dev "$work/dev-$name"
    [ "$(burrow call --url "$url" "$name" dev increment '[1]')" = 1 ] \
        || { echo "$name: burrow dev did not serve the counter" >&2; exit 1; }
    sed -i 's/value = value + ?/value = value + 2 * ?/' "$source"
    for _ in $(seq 1 1200); do
        before=$(burrow call --url "$url" "$name" dev get)
        after=$(burrow call --url "$url" "$name" dev increment '[1]')
        [ $((after - before)) = 2 ] && { redeployed=yes; break; }
        sleep 0.1
    done
    [ -n "$redeployed" ] || { echo "$name: burrow dev did not redeploy the changed source" >&2; exit 1; }
    stop_server
    echo "$name: burrow dev redeployed the changed source"
}

for lang in "${langs[@]}"; do
    sdk=$(sdk_for "$lang")
    if [ "$lang" = python ]; then
        # One virtual environment for the Python projects, with nothing but
        # what each project's requirements.txt installs.
        python3 -m venv "$work/venv"
        # shellcheck disable=SC1091
        . "$work/venv/bin/activate"
    fi
    for template in "${templates[@]}"; do
        name="hello-$lang-$template"
        echo "==> burrow new $name --lang $lang --template $template"
        cd "$work"
        burrow new "$name" --lang "$lang" --template "$template" --sdk "$sdk"
        cd "$name"
        case "$lang" in
            rust)
                # One compile cache for the three Rust projects, as a user's
                # shared CARGO_TARGET_DIR would be: the SDK and its
                # dependencies build once (each project's own component
                # keeps its name), and the project still reads `target/`.
                mkdir -p "$work/rust-target"
                ln -s "$work/rust-target" target
                cargo test --quiet
                ;;
            python)
                pip install --quiet --disable-pip-version-check -r requirements.txt
                python -m unittest
                ;;
            js)
                npm install --silent --no-audit --no-fund
                npm test
                ;;
        esac
        serve_and_call "$name" "$template"
        if [ "$template" = counter ]; then
            case "$lang" in
                rust) dev_redeploys "$name" src/lib.rs ;;
                python) dev_redeploys "$name" app.py ;;
                js) dev_redeploys "$name" app.js ;;
            esac
        fi
    done
    [ "$lang" != python ] || deactivate
done
echo "==> new projects: ${langs[*]} built, tested, served and called"
