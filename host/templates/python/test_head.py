"""Builds the actor and uses it on a host of the test's own (a new data
directory; the compiled component stays in the user's compile cache) with
the `burrow` command: `python -m unittest`."""

import os
import subprocess
import tempfile
import time
import unittest

ACTOR = "{{name}}"


class Test(unittest.TestCase):
    def setUp(self):
        data = tempfile.TemporaryDirectory()
        self.addCleanup(data.cleanup)
        self.data = data.name

    def burrow(self, *args):
        program = os.environ.get("BURROW", "burrow")
        env = dict(os.environ, BURROW_DATA_DIR=self.data)
        done = subprocess.run([program, *args], env=env, capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, f"burrow {args} failed: {done.stderr}{done.stdout}")
        return done.stdout.strip()

