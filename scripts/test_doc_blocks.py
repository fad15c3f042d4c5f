"""scripts/doc-blocks.py fails a page whose commands do not do what it
says, and passes one whose commands do."""

import contextlib
import importlib.util
import io
import os
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("doc_blocks", HERE / "doc-blocks.py")
doc_blocks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(doc_blocks)


def page(*lines):
    return "<!-- doc: run -->\n```sh\n" + "\n".join(lines) + "\n```\n"


class DocBlocks(unittest.TestCase):
    def run_page(self, text):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "page.md"
            path.write_text(text)
            # The pages fail on purpose: what the runner prints stays here.
            with contextlib.redirect_stdout(io.StringIO()):
                return doc_blocks.run_session(path, keep_failed=False)

    def test_a_page_that_does_what_it_says_passes(self):
        self.assertTrue(
            self.run_page(
                page(
                    "echo 5                  # -> 5",
                    "echo hi                 # -> \"hi\" (a string, printed bare)",
                    "echo '[{\"at\": 1767225601234}]'   # -> [{\"at\": 1767225600000}]",
                    "false                   # exit 1: refused",
                    "cd /tmp && x=1",
                    "test \"$x\" = 1 && test \"$PWD\" = /tmp",
                    "echo not checked        # -> the value, in prose",
                )
                + "\n<!-- doc: output -->\n```\nnot run\n```\n"
            )
        )

    def test_a_wrong_value_fails(self):
        self.assertFalse(self.run_page(page("echo 6   # -> 5")))

    def test_a_wrong_exit_status_fails(self):
        self.assertFalse(self.run_page(page("true   # exit 5: a cycle")))
        self.assertFalse(self.run_page(page("false")))

    def test_a_later_failure_fails_the_page(self):
        self.assertFalse(self.run_page(page("true", "echo 1   # -> 1") + page("exit 3")))

    def test_a_background_block_must_print_what_it_shows(self):
        background = "<!-- doc: background -->\n```sh\necho '{\"a\": 1}'\n# {\"a\": 2}\n```\n"
        self.assertFalse(self.run_page(background))
        self.assertTrue(self.run_page(background.replace('"a": 2', '"a": 1')))

    def test_comments_end_outside_quotes(self):
        self.assertEqual(doc_blocks.split_comment("echo '#1' \"#2\"  # -> 3"), ("echo '#1' \"#2\"", "-> 3"))
        self.assertEqual(doc_blocks.split_comment("curl a#b"), ("curl a#b", ""))

    def test_a_server_is_waited_for(self):
        self.assertEqual(doc_blocks.ready_url("burrow serve"), "http://127.0.0.1:7878/readyz")
        self.assertEqual(doc_blocks.ready_url("burrow dev --listen 127.0.0.1:7801"), "http://127.0.0.1:7801/readyz")
        self.assertIsNone(doc_blocks.ready_url("python3 scripts/provider.py"))


if __name__ == "__main__":
    os.chdir(HERE.parent)
    unittest.main()
