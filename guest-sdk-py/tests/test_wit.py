"""The SDK ships a copy of the repository's WIT package, `wit/` (its build
helper needs it where the repository is not): `actor.wit`, `http.wit` and
the WASI packages in `deps/`. The copy must be the repository's files."""

import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SHIPPED = os.path.join(HERE, "..", "burrow", "wit")
REPOSITORY = os.path.join(HERE, "..", "..", "wit")


def files(root):
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            if name.endswith(".wit"):
                path = os.path.join(directory, name)
                with open(path) as f:
                    found[os.path.relpath(path, root)] = f.read()
    return found


class Wit(unittest.TestCase):
    @unittest.skipUnless(os.path.exists(REPOSITORY), "not in the repository")
    def test_the_shipped_wit_is_the_repositorys(self):
        shipped, repository = files(SHIPPED), files(REPOSITORY)
        self.assertEqual(
            sorted(shipped),
            sorted(repository),
            "guest-sdk-py/burrow/wit/ lists other files than wit/: copy it over (cp -r wit guest-sdk-py/burrow/)",
        )
        for name, text in repository.items():
            self.assertEqual(
                shipped[name],
                text,
                f"guest-sdk-py/burrow/wit/{name} differs from wit/{name}: copy it over",
            )

    def test_the_http_world_imports_wasi_http(self):
        with open(os.path.join(SHIPPED, "http.wit")) as f:
            text = f.read()
        self.assertIn("world full-actor-http", text)
        self.assertIn("include full-actor;", text)
        self.assertIn("import wasi:http/outgoing-handler@0.2.12;", text)
        self.assertTrue(os.path.exists(os.path.join(SHIPPED, "deps", "http.wit")))


if __name__ == "__main__":
    unittest.main()
