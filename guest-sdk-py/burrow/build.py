"""Builds a Python actor into a WebAssembly component.

    python -m burrow.build path/to/app.py -o actor.wasm
    python -m burrow.build path/to/dir --module app -o actor.wasm

The actor's module (`app.py` by default) declares the actor with
`burrow.actor(...)` or `@burrow.action`. The helper writes a small entry
module that imports it and the SDK's exports, and runs componentize-py
(0.25.1) for the world `burrow:actor/full-actor-http-server` (`full-actor`,
`wasi:http/outgoing-handler` for `burrow.http`, and the export
`wasi:http/incoming-handler` for `@http.handler`) of the WIT package
shipped with this package. The SDK is copied next to the entry module, so the
component gets this very version of it whether it is installed with pip or
used from a source tree. Other modules of the actor's directory are
importable too.

A component whose inputs (the actor's Python files, this SDK, the WIT
package, the world and componentize-py's version) are those it was last
built from, by the digest in `OUTPUT.inputs`, is kept as it is:
componentize-py does not make the same bytes twice, and the host compiles
again whatever bytes are new.
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

COMPONENTIZE_PY_VERSION = "0.25.1"
ENTRY = "burrow_entry"

HERE = os.path.dirname(os.path.abspath(__file__))


def _componentize_py():
    exe = shutil.which("componentize-py")
    if exe is None:
        sys.exit(
            "burrow.build: componentize-py is not installed; "
            f"pip install componentize-py=={COMPONENTIZE_PY_VERSION}"
        )
    out = subprocess.run([exe, "--version"], capture_output=True, text=True)
    version = (out.stdout.split() or ["", "?"])[-1]
    if version != COMPONENTIZE_PY_VERSION:
        sys.exit(
            f"burrow.build: componentize-py {version} is installed, and this SDK needs "
            f"{COMPONENTIZE_PY_VERSION}: pip install componentize-py=={COMPONENTIZE_PY_VERSION}"
        )
    return exe


def _target(path, module):
    path = os.path.abspath(path)
    if path.endswith(".py"):
        if not os.path.isfile(path):
            sys.exit(f"burrow.build: {path} does not exist")
        return os.path.dirname(path), os.path.basename(path)[:-3]
    if not os.path.isfile(os.path.join(path, module + ".py")) and not os.path.isdir(os.path.join(path, module)):
        sys.exit(f"burrow.build: there is no module `{module}` in {path}")
    return path, module


WORLD = "full-actor-http-server"

# Folders of an actor's directory that hold no module of the actor.
_NOT_SOURCES = {"__pycache__", "node_modules", "target"}


def _python_files(directory):
    """The `.py` files under `directory`, sorted, hidden folders and
    `_NOT_SOURCES` left out."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _NOT_SOURCES)
        found += [os.path.join(root, f) for f in files if f.endswith(".py")]
    return sorted(found)


def inputs_digest(directory, module, wit, world):
    """What the component of the actor in `directory` is made from."""
    digest = hashlib.sha256()
    digest.update(f"componentize-py {COMPONENTIZE_PY_VERSION}\0{world}\0{module}\0".encode())
    for label, base, files in [
        ("actor", directory, _python_files(directory)),
        ("sdk", HERE, _python_files(HERE)),
        ("wit", wit, sorted(os.path.join(root, f) for root, _, names in os.walk(wit) for f in names if f.endswith(".wit"))),
    ]:
        for path in files:
            digest.update(f"{label}/{os.path.relpath(path, base)}\0".encode())
            with open(path, "rb") as f:
                digest.update(f.read())
            digest.update(b"\0")
    return digest.hexdigest()


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def build(source, output, module="app", wit=None, quiet=False, world=WORLD):
    """Builds the actor in `source` (a directory or a `.py` file) into
    `output`; returns the seconds it took."""
    begun = time.monotonic()
    directory, module = _target(source, module)
    if module == ENTRY or module == "burrow":
        sys.exit(f"burrow.build: the actor's module may not be named `{module}`")
    exe = _componentize_py()
    wit = os.path.abspath(wit or os.path.join(HERE, "wit"))
    output = os.path.abspath(output)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    digest = inputs_digest(directory, module, wit, world)
    stamp = output + ".inputs"
    if os.path.isfile(output) and _read(stamp) == digest:
        if not quiet:
            print(f"burrow.build: {output} is up to date", file=sys.stderr, flush=True)
        return time.monotonic() - begun
    if os.path.exists(stamp):
        os.remove(stamp)
    with tempfile.TemporaryDirectory(prefix="burrow-build-") as tmp:
        shutil.copytree(HERE, os.path.join(tmp, "burrow"), ignore=shutil.ignore_patterns("__pycache__", "wit"))
        with open(os.path.join(tmp, ENTRY + ".py"), "w") as f:
            f.write(
                "# The component's entry, written by burrow.build: the actor's module\n"
                "# declares the actor; the SDK's classes are the exports.\n"
                f"import {module}  # noqa: F401\n"
                "from burrow.exports import Access, Connections, Guest, Processor, WorkflowRunner  # noqa: F401\n"
                + (
                    "from burrow.exports import IncomingHandler  # noqa: F401\n"
                    if world == "full-actor-http-server"
                    else ""
                )
            )
        command = [
            exe,
            "--wit-path", wit,
            "--world", world,
            "componentize",
            "--python-path", tmp,
            "--python-path", directory,
            "--output", output,
            ENTRY,
        ]
        if not quiet:
            print(f"burrow.build: {module} in {directory} -> {output}", file=sys.stderr, flush=True)
        # componentize-py's own stdout is one line of success; its errors go
        # to stderr, and its stdout is shown when it fails.
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stdout)
            sys.exit(f"burrow.build: componentize-py failed ({done.returncode}) for {directory}/{module}")
    with open(stamp, "w") as f:
        f.write(digest)
    took = time.monotonic() - begun
    if not quiet:
        size = os.path.getsize(output) / 1e6
        print(f"burrow.build: built {output} ({size:.1f} MB) in {took:.1f} s", file=sys.stderr, flush=True)
    return took


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m burrow.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="the actor's directory, or its module's .py file")
    parser.add_argument("-o", "--output", required=True, help="the component to write")
    parser.add_argument("-m", "--module", default="app", help="the actor's module in the directory (default: app)")
    parser.add_argument("--wit", help="the WIT directory (default: the one shipped with the SDK)")
    parser.add_argument(
        "--world",
        default=WORLD,
        help=(
            f"the world (default: {WORLD}; `full-actor-http` leaves the HTTP handler out, "
            "`full-actor` wasi:http and burrow.http too)"
        ),
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    args = parser.parse_args(argv)
    build(args.source, args.output, args.module, args.wit, args.quiet, args.world)


if __name__ == "__main__":
    main()
