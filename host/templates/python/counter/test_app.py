"""Builds the actor and calls it on a host of the test's own (its data in
build/test-data, where compiled components stay cached between runs) with
the `burrow` command: `python -m unittest`."""

import os
import subprocess
import unittest

ACTOR = "{{name}}"


class Counter(unittest.TestCase):
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build", "test-data")
    key = f"test-{os.getpid()}"

    def burrow(self, *args):
        program = os.environ.get("BURROW", "burrow")
        env = dict(os.environ, BURROW_DATA_DIR=self.data)
        done = subprocess.run([program, *args], env=env, capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, f"burrow {args} failed: {done.stderr}{done.stdout}")
        return done.stdout.strip()

    def test_the_counter_counts(self):
        self.burrow("build")
        self.assertEqual(self.burrow("call", "--local", ACTOR, self.key, "increment", "[2]"), "2")
        self.assertEqual(self.burrow("call", "--local", ACTOR, self.key, "increment", "[3]"), "5")
        self.assertEqual(self.burrow("call", "--local", ACTOR, self.key, "get"), "5")


if __name__ == "__main__":
    unittest.main()
