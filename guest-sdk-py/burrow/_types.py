"""JSON in and out: checking decoded JSON against type hints, and encoding
results.

This module uses no bindings, so its logic is tested outside a component
(`guest-sdk-py/tests`).
"""

import dataclasses
import enum
import inspect
import json
import types
import typing

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1


class Mismatch(Exception):
    """A JSON value does not fit a type hint; `path` says where inside it."""

    def __init__(self, expected, value, path=""):
        self.expected = expected
        self.value = value
        self.path = path
        super().__init__(str(self))

    def __str__(self):
        where = f"{self.path}: " if self.path else ""
        return f"{where}expected {self.expected}, found {show(self.value)}"


class Missing(Exception):
    """An object lacks a field its dataclass needs."""

    def __init__(self, field, path=""):
        self.field = field
        self.path = path
        super().__init__(str(self))

    def __str__(self):
        where = f"{self.path}: " if self.path else ""
        return f"{where}missing field `{self.field}`"


def show(value, limit=80):
    """A JSON value as a short text for error messages."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(hint):
    """How an error message names the type a hint asks for."""
    if hint is int:
        return "i64"
    if hint is float:
        return "f64"
    if hint is str:
        return "a string"
    if hint is bool:
        return "a bool"
    if hint is None or hint is type(None):
        return "null"
    if hint is list or hint is tuple:
        return "a list"
    if hint is dict:
        return "an object"
    if dataclasses.is_dataclass(hint):
        return f"an object ({hint.__name__})"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(show(m.value) for m in hint)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(show(a) for a in args)
    if origin is list:
        return f"a list of {describe(args[0])}" if args else "a list"
    if origin is tuple:
        return f"a list of {len(args)}" if args else "a list"
    if origin is dict:
        return f"an object of {describe(args[1])}" if len(args) == 2 else "an object"
    return getattr(hint, "__name__", str(hint))


def is_any(hint):
    return hint is inspect.Parameter.empty or hint is typing.Any or hint is object


def check_hint(hint, where):
    """Raises TypeError at registration for a hint that `decode` cannot
    check, so that a mistake shows when the component is built, not when
    the action is called."""
    if is_any(hint) or hint in (int, float, str, bool, list, tuple, dict, None, type(None)):
        return
    if dataclasses.is_dataclass(hint):
        for field in dataclasses.fields(hint):
            check_hint(_field_hints(hint)[field.name], where)
        return
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return
    if origin in (typing.Union, types.UnionType, list, tuple, dict):
        if origin is dict and args and args[0] is not str:
            raise TypeError(f"{where}: JSON objects have string keys, not {args[0]!r}")
        for arg in args:
            if arg is not Ellipsis:
                check_hint(arg, where)
        return
    raise TypeError(f"{where}: the type hint {hint!r} cannot be checked against JSON")


def _field_hints(cls):
    return typing.get_type_hints(cls)


def decode(value, hint, path=""):
    """Checks the decoded JSON `value` against `hint` and converts it (a
    dataclass from an object, a float from an integer, a tuple from a list,
    an enum from its value). Raises `Mismatch` or `Missing`."""
    if is_any(hint):
        return value
    if hint is int:
        if type(value) is not int or not I64_MIN <= value <= I64_MAX:
            raise Mismatch("i64", value, path)
        return value
    if hint is float:
        if type(value) not in (int, float):
            raise Mismatch("f64", value, path)
        return float(value)
    if hint is str:
        if type(value) is not str:
            raise Mismatch("a string", value, path)
        return value
    if hint is bool:
        if type(value) is not bool:
            raise Mismatch("a bool", value, path)
        return value
    if hint is None or hint is type(None):
        if value is not None:
            raise Mismatch("null", value, path)
        return None
    if hint is list or hint is tuple:
        if type(value) is not list:
            raise Mismatch("a list", value, path)
        return value if hint is list else tuple(value)
    if hint is dict:
        if type(value) is not dict:
            raise Mismatch("an object", value, path)
        return value
    if dataclasses.is_dataclass(hint):
        return _decode_dataclass(value, hint, path)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        for member in hint:
            if member.value == value and type(member.value) is type(value):
                return member
        raise Mismatch(describe(hint), value, path)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        # `None` first, so that `Optional[T]` takes null as None.
        if value is None and type(None) in args:
            return None
        for arg in args:
            try:
                return decode(value, arg, path)
            except (Mismatch, Missing):
                continue
        raise Mismatch(describe(hint), value, path)
    if origin is typing.Literal:
        for arg in args:
            if arg == value and type(arg) is type(value):
                return value
        raise Mismatch(describe(hint), value, path)
    if origin is list:
        if type(value) is not list:
            raise Mismatch(describe(hint), value, path)
        if not args:
            return value
        return [decode(item, args[0], f"{path}[{i}]") for i, item in enumerate(value)]
    if origin is tuple:
        if type(value) is not list:
            raise Mismatch(describe(hint), value, path)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(item, args[0], f"{path}[{i}]") for i, item in enumerate(value))
        if args and len(value) != len(args):
            raise Mismatch(describe(hint), value, path)
        return tuple(decode(item, arg, f"{path}[{i}]") for i, (item, arg) in enumerate(zip(value, args)))
    if origin is dict:
        if type(value) is not dict:
            raise Mismatch(describe(hint), value, path)
        if len(args) != 2:
            return value
        return {k: decode(v, args[1], f"{path}.{k}") for k, v in value.items()}
    raise Mismatch(describe(hint), value, path)


def _decode_dataclass(value, cls, path):
    if type(value) is not dict:
        raise Mismatch(describe(cls), value, path)
    hints = _field_hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if field.name in value:
            kwargs[field.name] = decode(value[field.name], hints[field.name], f"{path}.{field.name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            if _optional(hints[field.name]):
                kwargs[field.name] = None
            else:
                raise Missing(field.name, path)
    return cls(**kwargs)


def _optional(hint):
    origin = typing.get_origin(hint)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _default(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value):
    """`value` as JSON text: dataclasses as objects, tuples as lists, bytes
    as lists of byte values. NaN and infinities are refused (JSON has
    none). Raises TypeError or ValueError."""
    return json.dumps(value, default=_default, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def loads(text):
    return json.loads(text)


class Signature:
    """An action's parameters and their hints, read once at registration."""

    def __init__(self, fn, name, skip=0):
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as e:
            raise TypeError(f"action `{name}`: cannot read its parameters: {e}") from None
        try:
            hints = typing.get_type_hints(fn)
        except Exception as e:
            raise TypeError(f"action `{name}`: cannot read its type hints: {e}") from None
        params = list(sig.parameters.values())[skip:]
        self.hints = []
        self.required = 0
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
                raise TypeError(
                    f"action `{name}`: parameter `{p.name}` is not positional; "
                    "actions take positional arguments only"
                )
            hint = hints.get(p.name, inspect.Parameter.empty)
            check_hint(hint, f"action `{name}`, parameter `{p.name}`")
            self.hints.append(hint)
            if p.default is inspect.Parameter.empty:
                self.required += 1

    def arity(self):
        total = len(self.hints)
        if self.required == total:
            return f"{total} argument{'' if total == 1 else 's'}"
        return f"{self.required} to {total} arguments"

    def decode(self, values):
        """The arguments, checked and converted; raises `InvalidArgs` with
        the SDK's message."""
        if not self.required <= len(values) <= len(self.hints):
            raise InvalidArgs(f"expected {self.arity()}, got {len(values)}")
        out = []
        for i, (value, hint) in enumerate(zip(values, self.hints), 1):
            try:
                out.append(decode(value, hint))
            except (Mismatch, Missing) as e:
                raise InvalidArgs(f"argument {i}: {e}") from None
        return out


class InvalidArgs(Exception):
    """Arguments that do not fit; the text is the caller's message."""


def parse_args(text):
    """The JSON array of arguments; raises `InvalidArgs` like the Rust SDK."""
    try:
        values = json.loads(text)
    except ValueError as e:
        raise InvalidArgs(f"arguments are not valid JSON: {e}") from None
    if type(values) is not list:
        raise InvalidArgs("arguments must be a JSON array")
    return values


def decode_input(text, hint, what):
    """A JSON input (a create input, connection parameters, a workflow's
    input) against the hint of the function that takes it; raises
    `InvalidArgs` naming `what`."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise InvalidArgs(f"{what} is not valid JSON: {e}") from None
    try:
        return decode(value, hint)
    except (Mismatch, Missing) as e:
        raise InvalidArgs(f"{what} does not fit: {e}") from None


def hint_of(fn, index):
    """The type hint of parameter `index` of `fn` (Any without one)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
        hints = typing.get_type_hints(fn)
    except (TypeError, ValueError, NameError):
        return inspect.Parameter.empty
    if index >= len(params):
        return inspect.Parameter.empty
    return hints.get(params[index].name, inspect.Parameter.empty)


def roundtrip(value):
    """What a replay gets back for `value`: JSON encoded and decoded. Code
    that takes recorded values must see the same thing on every run."""
    return json.loads(dumps(value))
