"""The SDK ships a copy of wit/actor.wit (its build helper needs it where
the repository is not); the copy must be the repository's file."""

import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SHIPPED = os.path.join(HERE, "..", "burrow", "wit", "actor.wit")
REPOSITORY = os.path.join(HERE, "..", "..", "wit", "actor.wit")


class Wit(unittest.TestCase):
    @unittest.skipUnless(os.path.exists(REPOSITORY), "not in the repository")
    def test_the_shipped_wit_is_the_repositorys(self):
        with open(SHIPPED) as shipped, open(REPOSITORY) as repository:
            self.assertEqual(
                shipped.read(),
                repository.read(),
                "guest-sdk-py/burrow/wit/actor.wit differs from wit/actor.wit: copy it over",
            )


if __name__ == "__main__":
    unittest.main()
