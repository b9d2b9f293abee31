"""The checked AST of a compiled selector, read from the engine's own serialisation.

Why read it at all: the cost of a selector is a property of its checked syntax tree (which calls
are made, on what types, inside which comprehensions), and cel-expr-python exposes no tree — only
``Expression.serialize()``, a ``google.protobuf.Any`` holding a ``cel.expr.CheckedExpr``. Reading
that message gives exactly the tree the engine will run (macros expanded, overloads resolved,
every node typed), so the estimate cannot drift from what is evaluated.

No generated protobuf classes are needed: this module decodes the protobuf wire format of the few
messages involved (``CheckedExpr``, ``Expr`` and its kinds, ``Constant``, ``Reference``, ``Type``)
directly. Field numbers are those of the published ``cel/expr/checked.proto`` and
``cel/expr/syntax.proto``; unknown fields are skipped, as protobuf readers do. Input is
untrusted only in the sense that it comes from a selector the engine already parsed (at most
10 KiB of source, nesting bounded by the parser), so the recursion here is bounded too.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5

Field = int | bytes
Fields = dict[int, list[Field]]


class AstError(ValueError):
    """The serialised expression is not a CheckedExpr this module understands."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise AstError("truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def _fields(buf: bytes) -> Fields:
    """Every field of one message: number -> values in wire order."""
    out: Fields = {}
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        value: Field
        if wire_type == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire_type == _BYTES:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise AstError("truncated length-delimited field")
            value, pos = buf[pos : pos + length], pos + length
        elif wire_type == _FIXED64:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire_type == _FIXED32:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise AstError(f"unsupported wire type {wire_type}")
        out.setdefault(number, []).append(value)
    return out


def _one(fields: Fields, number: int, default: Field = b"") -> Field:
    values = fields.get(number)
    return values[-1] if values else default


def _message(fields: Fields, number: int) -> bytes:
    value = _one(fields, number)
    if not isinstance(value, bytes):
        raise AstError(f"field {number} is not a message")
    return value


def _text(fields: Fields, number: int) -> str:
    return _message(fields, number).decode("utf-8", errors="replace")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# --- types -------------------------------------------------------------------------------------

# cel.expr.Type.PrimitiveType
_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
# cel.expr.Type oneof field number -> kind
_TYPE_KINDS = {
    1: "dyn",
    2: "null",
    4: "wrapper",
    5: "well_known",
    6: "list",
    7: "map",
    8: "function",
    9: "message",
    10: "type_param",
    11: "type",
    12: "error",
    14: "abstract",
}


@dataclass(frozen=True, slots=True)
class CelType:
    """A checked type, reduced to what cost estimation asks: its kind and parameters."""

    kind: str  # bool, int, uint, double, string, bytes, list, map, dyn, abstract, ...
    params: tuple[CelType, ...] = ()
    name: str = ""  # abstract or message type name


DYN = CelType("dyn")


def _type(buf: bytes) -> CelType:
    fields = _fields(buf)
    if 3 in fields:
        primitive = _one(fields, 3, 0)
        return CelType(_PRIMITIVES.get(primitive if isinstance(primitive, int) else 0, "dyn"))
    for number, kind in _TYPE_KINDS.items():
        if number not in fields:
            continue
        inner = _one(fields, number)
        if kind == "list" and isinstance(inner, bytes):
            elem = _fields(inner)
            return CelType("list", (_type(_message(elem, 1)) if 1 in elem else DYN,))
        if kind == "map" and isinstance(inner, bytes):
            parts = _fields(inner)
            key = _type(_message(parts, 1)) if 1 in parts else DYN
            value = _type(_message(parts, 2)) if 2 in parts else DYN
            return CelType("map", (key, value))
        if kind == "abstract" and isinstance(inner, bytes):
            parts = _fields(inner)
            params = tuple(_type(p) for p in parts.get(2, ()) if isinstance(p, bytes))
            return CelType("abstract", params, _text(parts, 1))
        if kind == "message" and isinstance(inner, bytes):
            return CelType("message", name=inner.decode("utf-8", errors="replace"))
        return CelType(kind)
    return DYN


# --- expressions -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Const:
    id: int
    value: object  # None, bool, int, float, str or bytes


@dataclass(frozen=True, slots=True)
class Ident:
    id: int
    name: str


@dataclass(frozen=True, slots=True)
class Select:
    id: int
    operand: Expr
    field: str
    test_only: bool


@dataclass(frozen=True, slots=True)
class Call:
    id: int
    function: str
    target: Expr | None
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class ListLit:
    id: int
    elements: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class MapLit:
    id: int
    entries: tuple[tuple[Expr, Expr], ...]  # (key, value); a message literal has field-name keys
    message: str  # "" for a map


@dataclass(frozen=True, slots=True)
class Comprehension:
    id: int
    iter_var: str
    iter_var2: str
    iter_range: Expr
    accu_var: str
    accu_init: Expr
    loop_condition: Expr
    loop_step: Expr
    result: Expr


Expr = Const | Ident | Select | Call | ListLit | MapLit | Comprehension


def _const(eid: int, buf: bytes) -> Const:
    fields = _fields(buf)
    value: object = None
    if 2 in fields:
        value = bool(_one(fields, 2, 0))
    elif 3 in fields:
        raw = _one(fields, 3, 0)
        value = _signed(raw) if isinstance(raw, int) else 0
    elif 4 in fields:
        value = _one(fields, 4, 0)
    elif 5 in fields:
        raw = _one(fields, 5)
        value = struct.unpack("<d", raw)[0] if isinstance(raw, bytes) and len(raw) == 8 else 0.0
    elif 6 in fields:
        value = _text(fields, 6)
    elif 7 in fields:
        value = _message(fields, 7)
    return Const(eid, value)


def _expr(buf: bytes) -> Expr:
    fields = _fields(buf)
    raw_id = _one(fields, 2, 0)
    eid = raw_id if isinstance(raw_id, int) else 0
    if 3 in fields:
        return _const(eid, _message(fields, 3))
    if 4 in fields:
        return Ident(eid, _text(_fields(_message(fields, 4)), 1))
    if 5 in fields:
        sel = _fields(_message(fields, 5))
        return Select(eid, _expr(_message(sel, 1)), _text(sel, 2), bool(_one(sel, 3, 0)))
    if 6 in fields:
        call = _fields(_message(fields, 6))
        target = _expr(_message(call, 1)) if 1 in call else None
        args = tuple(_expr(a) for a in call.get(3, ()) if isinstance(a, bytes))
        return Call(eid, _text(call, 2), target, args)
    if 7 in fields:
        lst = _fields(_message(fields, 7))
        return ListLit(eid, tuple(_expr(e) for e in lst.get(1, ()) if isinstance(e, bytes)))
    if 8 in fields:
        return _struct(eid, _fields(_message(fields, 8)))
    if 9 in fields:
        comp = _fields(_message(fields, 9))
        return Comprehension(
            eid,
            iter_var=_text(comp, 1),
            iter_var2=_text(comp, 8),
            iter_range=_expr(_message(comp, 2)),
            accu_var=_text(comp, 3),
            accu_init=_expr(_message(comp, 4)),
            loop_condition=_expr(_message(comp, 5)),
            loop_step=_expr(_message(comp, 6)),
            result=_expr(_message(comp, 7)),
        )
    return Const(eid, None)  # an empty Expr: nothing to evaluate


def _struct(eid: int, fields: Fields) -> MapLit:
    entries = []
    for raw in fields.get(2, ()):
        if not isinstance(raw, bytes):
            continue
        entry = _fields(raw)
        raw_entry_id = _one(entry, 1, 0)
        entry_id = raw_entry_id if isinstance(raw_entry_id, int) else 0
        key: Expr = _expr(_message(entry, 3)) if 3 in entry else Const(entry_id, _text(entry, 2))
        entries.append((key, _expr(_message(entry, 4))))
    return MapLit(eid, tuple(entries), _text(fields, 1))


@dataclass(frozen=True, slots=True)
class CheckedAst:
    root: Expr
    types: dict[int, CelType]
    overloads: dict[int, tuple[str, ...]]

    def type_of(self, expr: Expr) -> CelType:
        return self.types.get(expr.id, DYN)


def read_checked(serialized: bytes) -> CheckedAst:
    """The tree of ``Expression.serialize()`` (an ``Any`` holding a ``cel.expr.CheckedExpr``)."""
    outer = _fields(serialized)
    type_url = _text(outer, 1)
    if not type_url.endswith("cel.expr.CheckedExpr"):
        raise AstError(f"expected a cel.expr.CheckedExpr, got {type_url!r}")
    checked = _fields(_message(outer, 2))
    types: dict[int, CelType] = {}
    for raw in checked.get(3, ()):
        if isinstance(raw, bytes):
            entry = _fields(raw)
            key = _one(entry, 1, 0)
            if isinstance(key, int):
                types[key] = _type(_message(entry, 2))
    overloads: dict[int, tuple[str, ...]] = {}
    for raw in checked.get(2, ()):
        if isinstance(raw, bytes):
            entry = _fields(raw)
            key = _one(entry, 1, 0)
            reference = _fields(_message(entry, 2))
            ids = tuple(i.decode() for i in reference.get(3, ()) if isinstance(i, bytes))
            if isinstance(key, int) and ids:
                overloads[key] = ids
    if 4 not in checked:
        raise AstError("CheckedExpr without an expression")
    return CheckedAst(_expr(_message(checked, 4)), types, overloads)


__all__ = [
    "AstError",
    "Call",
    "CelType",
    "CheckedAst",
    "Comprehension",
    "Const",
    "Expr",
    "Ident",
    "ListLit",
    "MapLit",
    "Select",
    "read_checked",
]
