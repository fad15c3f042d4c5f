"""Unit tests of the SDK's pure logic (no component needed):

    python3 -m unittest discover -s guest-sdk-py/tests
"""

import dataclasses
import enum
import os
import sys
import unittest
from typing import Any, Literal, Optional

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import burrow  # noqa: E402
from burrow import _types  # noqa: E402
from burrow._actor import Registry  # noqa: E402
from burrow._types import InvalidArgs, Signature, decode_input, parse_args  # noqa: E402


@dataclasses.dataclass
class Point:
    x: int
    y: int
    label: Optional[str] = None


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def check(fn, args):
    """What an action call does before running: parse, then decode."""
    return Signature(fn, fn.__name__).decode(parse_args(args))


def invalid(fn, args):
    try:
        check(fn, args)
    except InvalidArgs as e:
        return str(e)
    raise AssertionError(f"{fn.__name__}({args}) was accepted")


def add(a: int, b: int) -> int:
    return a + b


def nothing():
    pass


def echo(i: int, f: float, s: str, b: bool, l: list[int], o: Any):
    return [i, f, s, b, l, o]


class Arguments(unittest.TestCase):
    def test_arity_says_the_count_like_the_rust_sdk(self):
        self.assertEqual(invalid(add, "[1]"), "expected 2 arguments, got 1")
        self.assertEqual(invalid(nothing, "[1]"), "expected 0 arguments, got 1")

        def one(a: int):
            pass

        self.assertEqual(invalid(one, "[1, 2]"), "expected 1 argument, got 2")

        def optional(a: int, b: int = 2):
            pass

        self.assertEqual(check(optional, "[1]"), [1])
        self.assertEqual(invalid(optional, "[]"), "expected 1 to 2 arguments, got 0")

    def test_json_that_is_no_array_is_refused(self):
        self.assertEqual(invalid(add, "{}"), "arguments must be a JSON array")
        self.assertTrue(invalid(add, "[1,").startswith("arguments are not valid JSON"))

    def test_each_type_error_names_its_argument(self):
        cases = {
            '["1", 2.5, "s", true, [], null]': "argument 1: expected i64, found \"1\"",
            "[1.5, 2.5, \"s\", true, [], null]": "argument 1: expected i64, found 1.5",
            '[true, 2.5, "s", true, [], null]': "argument 1: expected i64, found true",
            '[9223372036854775808, 2.5, "s", true, [], null]': "argument 1: expected i64",
            '[1, "2.5", "s", true, [], null]': "argument 2: expected f64",
            '[1, 2.5, 3, true, [], null]': "argument 3: expected a string, found 3",
            '[1, 2.5, "s", 1, [], null]': "argument 4: expected a bool, found 1",
            '[1, 2.5, "s", true, [1, "x"], null]': 'argument 5: [1]: expected i64, found "x"',
            '[1, 2.5, "s", true, {}, null]': "argument 5: expected a list of i64, found {}",
        }
        for args, message in cases.items():
            self.assertTrue(invalid(echo, args).startswith(message), (args, invalid(echo, args)))

    def test_values_are_converted(self):
        self.assertEqual(check(echo, '[-3, 2, "s", false, [1], {"k": [null]}]'), [-3, 2.0, "s", False, [1], {"k": [None]}])
        self.assertIsInstance(check(echo, '[1, 2, "s", true, [], null]')[1], float)

        def points(p: Point, ps: list[Point], c: Color, mode: Literal["a", "b"], t: tuple[int, str]):
            pass

        p, ps, c, mode, t = check(points, '[{"x": 1, "y": 2}, [{"x": 3, "y": 4, "label": "q"}], "red", "b", [1, "z"]]')
        self.assertEqual(p, Point(1, 2))
        self.assertEqual(ps, [Point(3, 4, "q")])
        self.assertIs(c, Color.RED)
        self.assertEqual((mode, t), ("b", (1, "z")))
        self.assertEqual(
            invalid(points, '[{"x": 1}, [], "red", "a", [1, "z"]]'), "argument 1: missing field `y`"
        )
        self.assertTrue(invalid(points, '[{"x": 1, "y": "2"}, [], "red", "a", [1, "z"]]').startswith("argument 1: .y: expected i64"))
        self.assertTrue(invalid(points, '[{"x": 1, "y": 2}, [], "green", "a", [1, "z"]]').startswith("argument 3: expected one of"))
        self.assertTrue(invalid(points, '[{"x": 1, "y": 2}, [], "red", "c", [1, "z"]]').startswith("argument 4: expected one of"))
        self.assertTrue(invalid(points, '[{"x": 1, "y": 2}, [], "red", "a", [1]]').startswith("argument 5:"))

    def test_optional_and_unions(self):
        def opt(a: Optional[int], b: int | str, c: dict[str, int]):
            pass

        self.assertEqual(check(opt, '[null, "x", {"k": 1}]'), [None, "x", {"k": 1}])
        self.assertTrue(invalid(opt, "[1.5, 1, {}]").startswith("argument 1: expected i64 or null"))
        self.assertTrue(invalid(opt, "[1, null, {}]").startswith("argument 2: expected i64 or a string"))
        self.assertTrue(invalid(opt, '[1, 1, {"k": "v"}]').startswith("argument 3: .k: expected i64"))

    def test_parameters_without_hints_take_any_json(self):
        def loose(a, b):
            pass

        self.assertEqual(check(loose, '[{"any": 1}, [true]]'), [{"any": 1}, [True]])

    def test_hints_that_json_cannot_check_are_refused_at_registration(self):
        def bad(a: set[int]):
            pass

        with self.assertRaisesRegex(TypeError, "cannot be checked"):
            Signature(bad, "bad")

        def keyed(a: dict[int, int]):
            pass

        with self.assertRaisesRegex(TypeError, "string keys"):
            Signature(keyed, "keyed")

        def varargs(*a):
            pass

        with self.assertRaisesRegex(TypeError, "positional"):
            Signature(varargs, "varargs")


class Inputs(unittest.TestCase):
    def test_inputs_decode_by_hint_and_name_what_was_wrong(self):
        self.assertEqual(decode_input('{"x": 1, "y": 2}', Point, "the create input"), Point(1, 2))
        with self.assertRaisesRegex(InvalidArgs, r"the create input does not fit: .x: expected i64"):
            decode_input('{"x": "1", "y": 2}', Point, "the create input")
        self.assertIsNone(decode_input("null", Optional[Point], "the create input"))


class Results(unittest.TestCase):
    def test_results_encode_as_json(self):
        self.assertEqual(_types.dumps((1, "a")), '[1,"a"]')
        self.assertEqual(_types.dumps(Point(1, 2)), '{"x":1,"y":2,"label":null}')
        self.assertEqual(_types.dumps(b"\x00\xff"), "[0,255]")
        self.assertEqual(_types.dumps("ü"), '"ü"')
        with self.assertRaises(ValueError):
            _types.dumps(float("nan"))
        with self.assertRaises(TypeError):
            _types.dumps(object())

    def test_a_replay_sees_what_json_gives_back(self):
        self.assertEqual(_types.roundtrip((1, Point(1, 2))), [1, {"x": 1, "y": 2, "label": None}])


class Declaration(unittest.TestCase):
    def test_a_queue_needs_a_policy_and_process(self):
        with self.assertRaisesRegex(ValueError, "both `policy` and `process`"):
            Registry().declare(process=lambda e: None)
        with self.assertRaisesRegex(ValueError, "both `policy` and `process`"):
            Registry().declare(policy=burrow.queue.Policy.fifo())

    def test_an_action_is_declared_once(self):
        registry = Registry()
        registry.declare(actions=[add])
        with self.assertRaisesRegex(ValueError, "declared twice"):
            registry.add_action(add)
        with self.assertRaisesRegex(ValueError, "called twice"):
            registry.declare()

    def test_policies(self):
        policy = burrow.queue.Policy.lifo().concurrency(4)
        self.assertEqual((policy.mode, policy.max_concurrency), ("lifo", 4))
        self.assertIsNone(burrow.queue.Policy.fifo().unlimited().max_concurrency)
        with self.assertRaises(ValueError):
            burrow.queue.Policy.fifo().concurrency(0)
        with self.assertRaises(ValueError):
            burrow.queue.Policy("sideways")


class Errors(unittest.TestCase):
    def test_not_in_step_is_one_class_across_capabilities(self):
        for module in (burrow.db, burrow.state, burrow.queue, burrow.schedule, burrow.events):
            e = module.NotInStep("db.execute was called by workflow code outside a step")
            self.assertIsInstance(e, burrow.NotInStep)
            self.assertIsInstance(e, burrow.Error)
            self.assertEqual(e.code, "not-in-step")
            self.assertIn("outside a step", e.message)
        e = burrow.actors.NotInStep("actors.call ...")
        self.assertIsInstance(e, burrow.NotInStep)
        self.assertEqual(e.code, "not-in-step")

    def test_db_errors_keep_their_kind(self):
        e = burrow.db.InvalidSql('near "SELEC": syntax error')
        self.assertIsInstance(e, burrow.db.DbError)
        self.assertEqual((e.code, e.kind), ("db", "invalid-sql"))
        self.assertEqual(e.failure_message(), 'invalid-sql: near "SELEC": syntax error')

    def test_errors_carry_code_message_and_step_flags(self):
        e = burrow.Error("card-declined", "declined", critical=True)
        self.assertEqual((e.code, e.message, e.critical, e.rollback), ("card-declined", "declined", True, False))
        self.assertEqual(str(e), "card-declined: declined")


if __name__ == "__main__":
    unittest.main()
