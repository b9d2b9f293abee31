"""What a selector reads of a device, when that is provably a few named values.

Why: a cluster has hundreds of thousands of devices but few distinct *kinds* of device. A class
selector such as ``device.driver == "gpu.deckhouse.io" &&
device.attributes["gpu.deckhouse.io"].migProfile == "1g.10gb"`` reads the driver and one attribute,
so its verdict is the same on every device where those two values are the same. Evaluating it once
per distinct pair instead of once per device is what lets ``explain`` diagnose every device of a
1,000-node cluster (224,000) in about a second, and makes a restart's first decisions cheaper.

The verdict stays the engine's own: CEL still runs, on the first device with each key; only the
repetition is skipped. The analysis reads the checked tree the engine runs (:mod:`.cel_ast`) and is
conservative: a selector that touches the device in any other way — ``device.capacity``, the whole
``device.attributes`` map or one domain's map as a value (``"x" in …``, ``size(…)``, ``cel.bind``),
an attribute named by a computed string — has no footprint and is evaluated per device as before.

Recognised reads: ``device.driver``, ``device.allowMultipleAllocations`` and one attribute named by
constants, ``device.attributes["domain"].name`` or ``device.attributes["domain"]["name"]``, also
under ``has()``. An attribute's value enters the key as written in the slice, under its qualified
name and, in the driver's own domain, under its short name too (the CEL input maps both to one
entry), so two devices share a key only if the selector sees the same values.

One condition belongs to the device, not the selector: building a device's CEL input fails as a
whole when any of its attributes cannot be encoded (a version that is not semver, a value with no
field set), and that error names the device. :func:`plain_attributes` says whether a device is
free of both; only such devices share verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pkg.dra.allocator.cel_ast import (
    Call,
    CheckedAst,
    Comprehension,
    Const,
    Expr,
    Ident,
    ListLit,
    MapLit,
    Select,
)

_DRIVER = "device.driver"
_MULTI = "device.allowMultipleAllocations"
_ATTRIBUTES = "device.attributes"
_CAPACITY = "device.capacity"
_INDEX = "_[_]"


@dataclass(frozen=True, slots=True)
class Footprint:
    """The device values a selector's verdict depends on (see the module docs)."""

    driver: bool
    multi: bool
    attributes: tuple[tuple[str, str], ...]  # (domain, name), sorted
    lookups: tuple[tuple[str, str, str], ...] = ()  # (domain, "domain/name", name): the keys to look up


class _OpaqueError(Exception):
    """The selector reads the device in a way not recognised: no footprint."""


def footprint(ast: CheckedAst) -> Footprint | None:
    """The footprint of a checked selector, or None when its verdict may depend on more."""
    reads: set[tuple[str, ...]] = set()
    try:
        _walk(ast.root, reads)
    except _OpaqueError:
        return None
    attributes = tuple(sorted((r[1], r[2]) for r in reads if r[0] == "attr"))
    lookups = tuple((domain, f"{domain}/{name}", name) for domain, name in attributes)
    return Footprint(
        driver=("driver",) in reads, multi=("multi",) in reads, attributes=attributes, lookups=lookups
    )


def _domain_map(expr: Expr) -> str | None:
    """``device.attributes["domain"]`` -> the domain; anything else -> None."""
    if (
        isinstance(expr, Call)
        and expr.function == _INDEX
        and expr.target is None
        and len(expr.args) == 2
        and isinstance(expr.args[0], Ident)
        and expr.args[0].name == _ATTRIBUTES
        and isinstance(expr.args[1], Const)
        and isinstance(expr.args[1].value, str)
    ):
        return expr.args[1].value
    return None


def _walk(expr: Expr, reads: set[tuple[str, ...]]) -> None:
    if isinstance(expr, Ident):
        if expr.name == _DRIVER:
            reads.add(("driver",))
        elif expr.name == _MULTI:
            reads.add(("multi",))
        elif expr.name in (_ATTRIBUTES, _CAPACITY):
            raise _OpaqueError  # the map itself as a value
        return
    if isinstance(expr, Const):
        return
    if isinstance(expr, Select):
        domain = _domain_map(expr.operand)
        if domain is not None:
            reads.add(("attr", domain, expr.field))
            return
        _walk(expr.operand, reads)
        return
    if isinstance(expr, Call):
        if expr.function == _INDEX and len(expr.args) == 2 and expr.target is None:
            domain = _domain_map(expr.args[0])
            name = expr.args[1]
            if domain is not None and isinstance(name, Const) and isinstance(name.value, str):
                reads.add(("attr", domain, name.value))
                return
        if expr.target is not None:
            _walk(expr.target, reads)
        for arg in expr.args:
            _walk(arg, reads)
        return
    if isinstance(expr, ListLit):
        for element in expr.elements:
            _walk(element, reads)
        return
    if isinstance(expr, MapLit):
        for key, value in expr.entries:
            _walk(key, reads)
            _walk(value, reads)
        return
    if isinstance(expr, Comprehension):
        for part in (expr.iter_range, expr.accu_init, expr.loop_condition, expr.loop_step, expr.result):
            _walk(part, reads)
        return
    raise _OpaqueError  # a node kind this walk does not know


_MISSING = ("<absent>",)


def _value(attr: Any) -> tuple[object, ...]:
    if attr is None:
        return _MISSING
    return (
        attr.bool,
        attr.int,
        attr.string,
        attr.version,
        None if attr.bools is None else tuple(attr.bools),
        None if attr.ints is None else tuple(attr.ints),
        None if attr.strings is None else tuple(attr.strings),
        None if attr.versions is None else tuple(attr.versions),
    )


def device_key(reads: Footprint, driver: str, device: Any) -> tuple[object, ...]:
    """The values of ``device`` (a ``V1Device`` of ``driver``) that ``reads`` names, as a hashable key."""
    attributes = device.attributes or {}
    values: list[object] = [
        driver if reads.driver else None,
        bool(device.allow_multiple_allocations) if reads.multi else None,
    ]
    for domain, qualified_name, name in reads.lookups:
        qualified = attributes.get(qualified_name)
        values.append(_value(qualified))
        if domain == driver:  # a short name lands in the driver's domain
            short = attributes.get(name)
            values.append(_value(short))
            if qualified is not None and short is not None:  # both: the later one wins in the input
                values.append(list(attributes).index(name) > list(attributes).index(qualified_name))
    return tuple(values)


def plain_attributes(device: Any) -> bool:
    """Whether every attribute of ``device`` encodes for CEL without a chance of failing: no
    version (parsed as semver) and a value set."""
    for attr in (device.attributes or {}).values():
        if attr.version is not None or attr.versions is not None:
            return False
        if (
            attr.string is None
            and attr.int is None
            and attr.bool is None
            and attr.strings is None
            and attr.ints is None
            and attr.bools is None
        ):
            return False
    return True


__all__ = ["Footprint", "device_key", "footprint", "plain_attributes"]
