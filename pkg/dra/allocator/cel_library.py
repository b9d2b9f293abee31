"""The Kubernetes CEL ``quantity`` and ``semver`` libraries for the cel-expr-python engine.

cel-expr-python (the C++ CEL runtime) type-checks custom *abstract* types but cannot carry Python
objects of such a type at run time ("Unimplemented type"). So every function is declared twice:

* for the **checking** environment with the abstract types ``kubernetes.Quantity`` and
  ``kubernetes.Semver`` — this is what rejects ``quantity("1") < quantity("2")`` or
  ``quantity("1").startsWith("x")`` at compile time, exactly as Kubernetes does;
* for the **runtime** environment with those types replaced by ``string``: a quantity travels as
  ``"\\ue000" + <value in nanos>`` and a semver as ``"\\ue001" + <version without build metadata>``.
  Both encodings are canonical, so CEL's own ``==`` gives Kubernetes' value equality
  (``quantity("1Gi") == quantity("1073741824")``; build metadata ignored), and the private-use
  prefix means no published attribute string is mistaken for one.

Member functions shared by both types (``compareTo``, ``isGreaterThan``, ``isLessThan``) get one
runtime implementation that dispatches on the prefix; a plain string receiver (possible through a
``dyn`` attribute) fails with "no such overload", as it does in Kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from pkg.dra.allocator.quantity import NANO, Quantity, QuantityError, is_quantity, parse_quantity
from pkg.dra.allocator.semver import (
    Semver,
    SemverError,
    is_semver,
    normalize_and_parse,
    parse_semver,
)

QUANTITY_TAG = "\ue000"
SEMVER_TAG = "\ue001"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Nanos of any quantity arithmetic can reach: values below 2^63 x 10^9, sums of a few thousand.
_ENCODED_QUANTITY = re.compile(QUANTITY_TAG + r"-?[0-9]{1,40}", re.ASCII)
_MAX_ENCODED_SEMVER = 1 + 1024


def encode_quantity(quantity: Quantity) -> str:
    return f"{QUANTITY_TAG}{quantity.nanos}"


def encode_semver(version: Semver) -> str:
    return SEMVER_TAG + version.canonical()


def _no_overload(name: str) -> TypeError:
    return TypeError(f"no such overload: {name}")


def _nanos(value: object, name: str) -> int:
    # Only what encode_quantity makes is a quantity: a string forged through dyn() that merely
    # starts with the tag is a plain string, whatever digits follow (never a huge int() parse).
    if isinstance(value, str) and _ENCODED_QUANTITY.fullmatch(value):
        return int(value[1:])
    raise _no_overload(name)


def _version(value: object, name: str) -> Semver:
    if isinstance(value, str) and value[:1] == SEMVER_TAG and len(value) <= _MAX_ENCODED_SEMVER:
        try:
            return parse_semver(value[1:])
        except SemverError:
            pass
    raise _no_overload(name)


def _compare(a: object, b: object, name: str) -> int:
    if isinstance(a, str) and a[:1] == QUANTITY_TAG:
        x, y = _nanos(a, name), _nanos(b, name)
        return (x > y) - (x < y)
    return _version(a, name).compare(_version(b, name))


def _quantity(text: str) -> str:
    try:
        return encode_quantity(parse_quantity(text))
    except QuantityError as err:
        raise ValueError(str(err)) from None


def _semver(text: str, normalize: bool = False) -> str:
    try:
        return encode_semver(normalize_and_parse(text) if normalize else parse_semver(text))
    except SemverError as err:
        raise ValueError(str(err)) from None


def _as_integer(q: str) -> int:
    value = Quantity(_nanos(q, "asInteger")).as_int64()
    if value is None:
        raise ValueError("cannot convert value to integer")
    return value


def _add_int(q: str, n: int) -> str:
    return f"{QUANTITY_TAG}{_nanos(q, 'add') + n * NANO}"


def _sub_int(q: str, n: int) -> str:
    return f"{QUANTITY_TAG}{_nanos(q, 'sub') - n * NANO}"


class FunctionSpec(NamedTuple):
    """One overload. Types are symbolic: Q (quantity), S (semver), string, int, bool, double."""

    name: str
    overload_id: str
    params: tuple[str, ...]
    result: str
    member: bool
    impl: Callable[..., Any]


FUNCTIONS: tuple[FunctionSpec, ...] = (
    FunctionSpec("quantity", "string_to_quantity", ("string",), "Q", False, _quantity),
    FunctionSpec("isQuantity", "is_quantity_string", ("string",), "bool", False, is_quantity),
    FunctionSpec("sign", "quantity_sign", ("Q",), "int", False, lambda q: Quantity(_nanos(q, "sign")).sign()),
    FunctionSpec(
        "isGreaterThan",
        "quantity_is_greater_than",
        ("Q", "Q"),
        "bool",
        True,
        lambda a, b: _compare(a, b, "isGreaterThan") > 0,
    ),
    FunctionSpec(
        "isLessThan",
        "quantity_is_less_than",
        ("Q", "Q"),
        "bool",
        True,
        lambda a, b: _compare(a, b, "isLessThan") < 0,
    ),
    FunctionSpec(
        "compareTo", "quantity_compare_to", ("Q", "Q"), "int", True, lambda a, b: _compare(a, b, "compareTo")
    ),
    FunctionSpec(
        "asApproximateFloat",
        "quantity_get_float",
        ("Q",),
        "double",
        True,
        lambda q: _nanos(q, "asApproximateFloat") / NANO,
    ),
    FunctionSpec("asInteger", "quantity_get_int", ("Q",), "int", True, _as_integer),
    FunctionSpec(
        "isInteger",
        "quantity_is_integer",
        ("Q",),
        "bool",
        True,
        lambda q: Quantity(_nanos(q, "isInteger")).as_int64() is not None,
    ),
    FunctionSpec(
        "add",
        "quantity_add",
        ("Q", "Q"),
        "Q",
        True,
        lambda a, b: f"{QUANTITY_TAG}{_nanos(a, 'add') + _nanos(b, 'add')}",
    ),
    FunctionSpec("add", "quantity_add_int", ("Q", "int"), "Q", True, _add_int),
    FunctionSpec(
        "sub",
        "quantity_sub",
        ("Q", "Q"),
        "Q",
        True,
        lambda a, b: f"{QUANTITY_TAG}{_nanos(a, 'sub') - _nanos(b, 'sub')}",
    ),
    FunctionSpec("sub", "quantity_sub_int", ("Q", "int"), "Q", True, _sub_int),
    FunctionSpec("semver", "string_to_semver", ("string",), "S", False, _semver),
    FunctionSpec("semver", "string_bool_to_semver", ("string", "bool"), "S", False, _semver),
    FunctionSpec("isSemver", "is_semver_string", ("string",), "bool", False, is_semver),
    FunctionSpec(
        "isSemver",
        "is_semver_string_bool",
        ("string", "bool"),
        "bool",
        False,
        lambda text, normalize: is_semver(text, normalize=normalize),
    ),
    FunctionSpec(
        "isGreaterThan",
        "semver_is_greater_than",
        ("S", "S"),
        "bool",
        True,
        lambda a, b: _compare(a, b, "isGreaterThan") > 0,
    ),
    FunctionSpec(
        "isLessThan",
        "semver_is_less_than",
        ("S", "S"),
        "bool",
        True,
        lambda a, b: _compare(a, b, "isLessThan") < 0,
    ),
    FunctionSpec(
        "compareTo", "semver_compare_to", ("S", "S"), "int", True, lambda a, b: _compare(a, b, "compareTo")
    ),
    FunctionSpec("major", "semver_major", ("S",), "int", True, lambda v: _version(v, "major").major),
    FunctionSpec("minor", "semver_minor", ("S",), "int", True, lambda v: _version(v, "minor").minor),
    FunctionSpec("patch", "semver_patch", ("S",), "int", True, lambda v: _version(v, "patch").patch),
)
