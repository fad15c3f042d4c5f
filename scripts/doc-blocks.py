#!/usr/bin/env python3
"""Runs the shell blocks of README.md and docs/ as a reader would.

A block with `<!-- doc: run -->` on the line before it is run line by
line; `<!-- doc: background -->` runs the whole block in the background
(a `burrow watch`, say) and waits for its first line of output. The other
notes are checked by tests/all/docs.rs.

Each Markdown file is one bash session: the blocks run in order, each
from the checkout's root, with `target/debug` first on PATH (the `burrow`
the tests built), HOME a new folder (so `cd ~` leaves the checkout) and
BURROW_DATA_DIR a new data directory. Every command must succeed, or end
with the status its `# exit N` says; a `# -> VALUE` whose VALUE is JSON
(a trailing remark in parentheses aside) must be what the command prints,
where a 13-digit number (a time in milliseconds) stands for any such
number and a JSON string also matches the same text printed bare. A comment line of JSON in a background block is a line it must
print within 10 s. A line ending in `&` starts in the background; when it
is `burrow serve` or `burrow dev`, the session waits until that server is
ready. At the session's end everything it started is stopped.

    python3 scripts/doc-blocks.py [FILE...]     # default: README.md, docs/**/*.md
"""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTE = re.compile(r"^\s*<!-- doc:\s*(.*?)\s*-->\s*$")


def blocks(path):
    """(line, note, text) of each fenced block that has a note."""
    lines = path.read_text().split("\n")
    found, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        note = NOTE.match(lines[i - 1]) if i > 0 else None
        if note:
            found.append((i + 1, note.group(1), lines[i + 1 : end]))
        i = end + 1
    return found


def split_comment(line):
    """The command and its trailing comment (after ` #` outside quotes)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def logical_lines(lines):
    """Lines with their `\\` continuations joined."""
    joined, pending = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
        else:
            joined.append(pending + line)
            pending = ""
    return joined


def expected_value(comment):
    """The JSON a `-> VALUE` comment promises, or None when it is prose."""
    if not comment.startswith("->"):
        return None
    value = re.sub(r"\s*\([^()]*\)$", "", comment[2:].strip())
    try:
        return json.loads(value)
    except ValueError:
        return None


def same(want, got):
    """JSON equality, where a 13-digit number in `want` is any such number."""
    if isinstance(want, bool) or isinstance(got, bool):
        return want == got
    if isinstance(want, int) and 10**12 <= want < 10**13:
        return isinstance(got, int) and 10**12 <= got < 10**13
    if isinstance(want, dict):
        return isinstance(got, dict) and want.keys() == got.keys() and all(same(want[k], got[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(map(same, want, got))
    return want == got


def ready_url(command):
    """The /readyz of a `burrow serve` or `burrow dev` command, else None."""
    words = shlex.split(command)
    if len(words) < 2 or words[0] != "burrow" or words[1] not in ("serve", "dev"):
        return None
    listen = "127.0.0.1:7878"
    for i, word in enumerate(words):
        if word == "--listen" and i + 1 < len(words):
            listen = words[i + 1]
        elif word.startswith("--listen="):
            listen = word.split("=", 1)[1]
    return f"http://{listen}/readyz"


def session_script(name, found, work):
    """The bash script that runs the file's run and background blocks."""
    me = shlex.quote(str(Path(__file__).resolve()))
    out = [
        "shopt -s expand_aliases",
        "doc_fail() { echo \"doc-blocks: $1\" >&2; exit 1; }",
        # Waits for a server the session started to answer /readyz.
        "doc_ready() { for _ in $(seq 1 6000); do curl -fsS \"$1\" >/dev/null 2>&1 && return; sleep 0.1; done;"
        " doc_fail \"$2: the server was not ready within 10 minutes\"; }",
    ]
    expectations = []
    for number, (line, note, lines) in enumerate(found):
        out.append(f"cd {shlex.quote(str(REPO))}")
        if note == "background":
            log = work / f"background-{number}.log"
            body = "\n".join(lines)
            out.append(f"echo '--- {name}:{line} (background)'")
            out.append(f"( {body}\n) > {shlex.quote(str(log))} 2>&1 &")
            out.append(
                f"for _ in $(seq 1 300); do [ -s {shlex.quote(str(log))} ] && break; sleep 0.1; done;"
                f" [ -s {shlex.quote(str(log))} ] || doc_fail '{name}:{line}: the background block printed nothing within 30 s'"
            )
            for text in lines:
                command, comment = split_comment(text)
                if not command and comment.startswith("{"):
                    expectations.append((f"{name}:{line}", log, comment))
            continue
        for offset, text in enumerate(logical_lines(lines)):
            command, comment = split_comment(text)
            if not command:
                continue
            place = f"{name}:{line + 1 + offset}"
            out.append(f"echo \"[$SECONDS s] \"{shlex.quote('$ ' + command)}")
            exit_code = re.match(r"exit (\d+)", comment)
            want = expected_value(comment)
            if command.endswith("&"):
                out.append(command)
                url = ready_url(command[:-1])
                if url:
                    out.append(f"doc_ready {shlex.quote(url)} {shlex.quote(place)}")
            elif exit_code or want is not None:
                status = int(exit_code.group(1)) if exit_code else 0
                out.append(f"doc_out=$({command}); doc_rc=$?; printf '%s\\n' \"$doc_out\"")
                out.append(
                    f"[ $doc_rc -eq {status} ] || doc_fail {shlex.quote(place + ': exit status ')}\"$doc_rc, not {status}\""
                )
                if want is not None:
                    out.append(
                        f"python3 {me} --same {shlex.quote(json.dumps(want))} \"$doc_out\""
                        f" || doc_fail {shlex.quote(place + ': printed something else than ' + json.dumps(want))}"
                    )
            else:
                out.append(command)
                out.append(f"doc_rc=$?; [ $doc_rc -eq 0 ] || doc_fail {shlex.quote(place + ': exit status ')}\"$doc_rc\"")
    for place, log, want in expectations:
        out.append(
            f"python3 {me} --printed {shlex.quote(want)} {shlex.quote(str(log))}"
            f" || doc_fail {shlex.quote(place + ': the background block never printed ' + want)}"
        )
    return "\n".join(out) + "\n"


def run_session(path, keep_failed=True):
    """Runs one file's blocks; True when they all did what they say. The
    session's folder is left for a look when it failed and `keep_failed`."""
    name = os.path.relpath(path, REPO)
    found = [b for b in blocks(path) if b[1] in ("run", "background")]
    if not found:
        return True
    work = Path(tempfile.mkdtemp(prefix="burrow-doc-"))
    (work / "home").mkdir()
    env = dict(os.environ)
    home = Path.home()
    env.update(
        PATH=f"{REPO / 'target' / 'debug'}:{env['PATH']}",
        HOME=str(work / "home"),
        CARGO_HOME=env.get("CARGO_HOME", str(home / ".cargo")),
        RUSTUP_HOME=env.get("RUSTUP_HOME", str(home / ".rustup")),
        BURROW_DATA_DIR=str(work / "data"),
        BURROW_CACHE_DIR=env.get("BURROW_CACHE_DIR", str(REPO / "target" / "tmp" / "compile-cache")),
    )
    for variable in ("BURROW_MANIFEST", "BURROW_URL", "BURROW_TOKEN"):
        env.pop(variable, None)
    script = work / "session.sh"
    script.write_text(session_script(name, found, work))
    log = work / "session.log"
    started = time.monotonic()
    print(f"==> {name}: {len(found)} block(s)", flush=True)
    with open(log, "w") as out:
        bash = subprocess.Popen(["bash", str(script)], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        status = bash.wait()
    try:
        os.killpg(bash.pid, signal.SIGTERM)
        time.sleep(0.5)
        os.killpg(bash.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    text = log.read_text(errors="replace")
    if status != 0:
        print("\n".join(text.splitlines()[-60:]))
        if keep_failed:
            print(f"==> {name}: FAILED (the session's files are in {work})")
        else:
            print(f"==> {name}: FAILED")
            shutil.rmtree(work, ignore_errors=True)
        return False
    print("\n".join(line for line in text.splitlines() if re.match(r"\[\d+ s\] \$ ", line)))
    print(f"==> {name}: ok in {time.monotonic() - started:.0f} s")
    shutil.rmtree(work, ignore_errors=True)
    return True


def printed(want, log):
    """Waits up to 10 s for a line of `log` that is the JSON `want`."""
    want = json.loads(want)
    for _ in range(100):
        for line in Path(log).read_text(errors="replace").splitlines():
            try:
                if same(want, json.loads(line)):
                    return True
            except ValueError:
                pass
        time.sleep(0.1)
    return False


def main(args):
    if args[:1] == ["--same"]:
        want = json.loads(args[1])
        try:
            got = json.loads(args[2])
        except ValueError:
            got = args[2]  # a string result is printed as its text
        return 0 if same(want, got) else 1
    if args[:1] == ["--printed"]:
        return 0 if printed(args[1], args[2]) else 1
    files = [Path(a).resolve() for a in args] or [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))
    failed = [f for f in files if not run_session(f)]
    if failed:
        print("doc-blocks: failed: " + ", ".join(os.path.relpath(f, REPO) for f in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
