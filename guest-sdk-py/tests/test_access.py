"""Internal actions and the caller, as far as they are pure logic:

    python3 -m unittest discover -s guest-sdk-py/tests
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import burrow  # noqa: E402
from burrow._actor import Registry  # noqa: E402


def remind(text: str) -> int:
    return 1


def fire(text: str):
    return None


class InternalActions(unittest.TestCase):
    def test_an_actor_without_internal_actions_has_none(self):
        registry = Registry()
        registry.declare(actions=[remind, fire])
        self.assertEqual(registry.internal_actions(), ([], True))

    def test_internal_actions_are_named_by_function_or_name(self):
        registry = Registry()
        registry.declare(actions=[remind, fire], internal=[fire])
        self.assertEqual(registry.internal_actions(), (["fire"], True))
        registry = Registry()
        registry.declare(actions=[remind, fire], internal=["fire", "remind"], internal_from_actors=False)
        self.assertEqual(registry.internal_actions(), (["fire", "remind"], False))

    def test_the_decorator_marks_an_action_internal(self):
        registry = Registry()
        registry.add_action(fire, internal=True)
        registry.add_action(remind)
        registry.declare()
        self.assertEqual(registry.internal_actions(), (["fire"], True))

    def test_internal_names_only_actions(self):
        with self.assertRaisesRegex(ValueError, "not one of the actor's actions"):
            Registry().declare(actions=[remind], internal=["fire"])
        with self.assertRaisesRegex(ValueError, "not one of the actor's actions"):
            Registry().declare(actions=[remind], internal=[fire])
        with self.assertRaisesRegex(TypeError, "True or False"):
            Registry().declare(actions=[fire], internal=[fire], internal_from_actors="no")


class Callers(unittest.TestCase):
    def test_callers_are_json_as_the_host_writes_them(self):
        cases = [
            (burrow.Caller("client"), {"client": None}),
            (
                burrow.Caller("client", burrow.Identity("ann", "admin")),
                {"client": {"name": "ann", "role": "admin"}},
            ),
            (burrow.Caller("actor", actor="a", key="k"), {"actor": {"actor": "a", "key": "k"}}),
            (burrow.Caller("schedule"), "schedule"),
            (burrow.Caller("host"), "host"),
        ]
        for caller, expected in cases:
            self.assertEqual(caller.to_json(), expected)

    def test_a_caller_has_a_known_kind(self):
        with self.assertRaises(ValueError):
            burrow.Caller("stranger")

    def test_caller_needs_the_host(self):
        with self.assertRaisesRegex(RuntimeError, "needs the host"):
            burrow.caller()


if __name__ == "__main__":
    unittest.main()
