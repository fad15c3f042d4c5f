"""`burrow.build` keeps a component whose inputs have not changed, and
builds again when one has, with a stand-in for componentize-py that writes
new bytes every time (as the real one does)."""

import os
import stat
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from burrow import build  # noqa: E402

FAKE = f"""#!{sys.executable}
import os, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("componentize-py {build.COMPONENTIZE_PY_VERSION}")
    sys.exit(0)
if os.environ.get("FAKE_FAIL"):
    sys.exit("componentize failed")
with open(args[args.index("--output") + 1], "wb") as f:
    f.write(os.urandom(32))
with open(os.environ["FAKE_RUNS"], "a") as f:
    f.write("run\\n")
"""


class Build(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        root = self.dir.name
        tools = os.path.join(root, "bin")
        os.makedirs(tools)
        fake = os.path.join(tools, "componentize-py")
        with open(fake, "w") as f:
            f.write(FAKE)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
        self.saved = dict(os.environ)
        os.environ["PATH"] = tools + os.pathsep + os.environ["PATH"]
        os.environ["FAKE_RUNS"] = os.path.join(root, "runs")
        self.app = os.path.join(root, "actor")
        os.makedirs(os.path.join(self.app, ".venv"))
        self.write("app.py", "import burrow\n")
        self.out = os.path.join(root, "out", "actor.wasm")

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.saved)
        self.dir.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.app, name), "w") as f:
            f.write(text)

    def build(self):
        build.build(self.app, self.out, quiet=True)
        with open(self.out, "rb") as f:
            return f.read()

    def runs(self):
        with open(os.environ["FAKE_RUNS"]) as f:
            return len(f.read().split())

    def test_unchanged_inputs_keep_the_component(self):
        first = self.build()
        self.assertEqual(self.build(), first)
        self.assertEqual(self.runs(), 1)

    def test_a_changed_module_builds_again(self):
        first = self.build()
        self.write("helper.py", "X = 1\n")
        self.assertNotEqual(self.build(), first)
        self.assertEqual(self.runs(), 2)

    def test_files_outside_the_sources_do_not_count(self):
        self.build()
        with open(os.path.join(self.app, ".venv", "site.py"), "w") as f:
            f.write("changed = True\n")
        self.write("notes.txt", "not a module\n")
        self.build()
        self.assertEqual(self.runs(), 1)

    def test_another_world_builds_again(self):
        self.build()
        build.build(self.app, self.out, quiet=True, world="full-actor")
        self.assertEqual(self.runs(), 2)

    def test_a_failed_build_leaves_no_stamp(self):
        self.build()
        self.write("app.py", "import burrow  # changed\n")
        os.environ["FAKE_FAIL"] = "1"
        with self.assertRaises(SystemExit):
            build.build(self.app, self.out, quiet=True)
        self.assertFalse(os.path.exists(self.out + ".inputs"))
        del os.environ["FAKE_FAIL"]
        self.build()
        self.assertEqual(self.runs(), 2)


if __name__ == "__main__":
    unittest.main()
