"""The worst-case cost and value sizes of a selector, before it ever runs.

Kubernetes bounds a DRA selector twice: the API server refuses one whose *estimated* worst-case
cost exceeds ``CELSelectorExpressionMaxCost`` (1,000,000; ``k8s.io/api/resource/v1``) when a
DeviceClass or claim is written, and the scheduler stops an evaluation whose *actual* cost passes
the same limit. The C++ engine we run (cel-expr-python) has no cost tracker — its only run-time
bound is a budget of 10,000 comprehension iterations per evaluation — so the estimate has to carry
the whole bound: an expression whose estimate fits cannot cost more when it runs, because the
estimate is an upper bound over every device the API server could admit.

The model is cel-go's (``checker/cost.go`` and the standard overload models) with the Kubernetes
library costs (``k8s.io/apiserver/pkg/cel/library/cost.go``) and the DRA size estimator
(``k8s.io/dynamic-resource-allocation/cel``): reading a variable or field costs 1, a call 1 unless
it has a model, strings cost 0.1 per character traversed (``StringTraversalCostFactor``), a list
literal 10, a map literal 30, a comprehension the cost of its body times the size of its range,
and the size of every input is bounded by the API's own limits — a driver name at most 63
characters, at most 32 attributes and capacities per device, attribute values at most 64
characters or list entries, domains at most 63 and names at most 32 characters.

One thing cel-go's model does not bound is the *size* of what an expression builds: ``replace``,
``join`` and list concatenation are charged for what they read, not for what they make, and
cel-go's lists concatenate lazily where the C++ engine copies. A 300-character selector of chained
``replace`` calls passes the cost check and builds gigabytes. So every intermediate value is
bounded too (:data:`MAX_STRING_SIZE`, :data:`MAX_LIST_SIZE`): the largest string the cost limit
would let an expression read once (1,000,000 / 0.1 characters) and the largest list it would let
an expression scan once (1,000,000 elements at 1 per element). A selector over either limit is
rejected when compiled, with the size in the message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from pkg.dra.allocator.cel_ast import (
    Call,
    CelType,
    CheckedAst,
    Comprehension,
    Const,
    Expr,
    Ident,
    ListLit,
    MapLit,
    Select,
)

MAX_COST = 1_000_000  # k8s.io/api/resource/v1 CELSelectorExpressionMaxCost
STRING_TRAVERSAL_COST_FACTOR = 0.1  # cel-go common.StringTraversalCostFactor
REGEX_STRING_LENGTH_COST_FACTOR = 0.25  # cel-go common.RegexStringLengthCostFactor
MAX_STRING_SIZE = int(MAX_COST / STRING_TRAVERSAL_COST_FACTOR)  # 10,000,000 characters
MAX_LIST_SIZE = MAX_COST  # 1,000,000 elements: one cost unit per element scanned

# k8s.io/api/resource/v1 limits that bound every input a selector can read.
DRIVER_NAME_MAX_LENGTH = 63  # DriverNameMaxLength
DEVICE_MAX_DOMAIN_LENGTH = 63  # DeviceMaxDomainLength
DEVICE_MAX_ID_LENGTH = 32  # DeviceMaxIDLength
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64  # DeviceAttributeMaxValueLength
MAX_ATTRIBUTE_VALUES_PER_DEVICE = 48  # ResourceSliceMaxAttributeValuesPerDevice (list attributes)
MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice

_U64 = 2**64 - 1
_LIST_CREATE, _MAP_CREATE, _STRUCT_CREATE = 10, 30, 40  # cel-go List/Map/StructCreateBaseCost
_ACCUMULATORS = frozenset({"@result", "__result__"})
_STRINGS = frozenset({"string", "bytes"})
_CONTAINERS = frozenset({"list", "map"})


@dataclass(frozen=True, slots=True)
class Range:
    """A [lo, hi] estimate of a cost or size, saturating at 2^64-1 like cel-go's uint64."""

    lo: int
    hi: int

    def __add__(self, other: Range) -> Range:
        return Range(min(self.lo + other.lo, _U64), min(self.hi + other.hi, _U64))

    def times(self, other: Range) -> Range:
        return Range(min(self.lo * other.lo, _U64), min(self.hi * other.hi, _U64))

    def scaled(self, factor: float) -> Range:
        def one(x: int) -> int:
            return _U64 if x >= _U64 else min(math.ceil(x * factor), _U64)

        return Range(one(self.lo), one(self.hi))

    def union(self, other: Range) -> Range:
        return Range(min(self.lo, other.lo), max(self.hi, other.hi))


def fixed(value: int) -> Range:
    return Range(value, value)


UNKNOWN = Range(0, _U64)
ZERO = fixed(0)


@dataclass(frozen=True, slots=True)
class _Shape:
    """The declared maximum size of a value reachable from ``device`` (apiserver ``DeclType``)."""

    max_elements: int
    fields: dict[str, _Shape] | None = None
    key: _Shape | None = None
    elem: _Shape | None = None


_ATTRIBUTE = _Shape(max(DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH, MAX_ATTRIBUTE_VALUES_PER_DEVICE))
_DOMAIN = _Shape(DEVICE_MAX_DOMAIN_LENGTH)
_ID = _Shape(DEVICE_MAX_ID_LENGTH)
_PER_DEVICE = MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE
_INNER_ATTRIBUTES = _Shape(_PER_DEVICE, key=_ID, elem=_ATTRIBUTE)
_INNER_CAPACITY = _Shape(_PER_DEVICE, key=_ID, elem=_Shape(1))
_DEVICE = _Shape(
    0,
    fields={
        "driver": _Shape(DRIVER_NAME_MAX_LENGTH),
        "allowMultipleAllocations": _Shape(1),
        "attributes": _Shape(_PER_DEVICE, key=_DOMAIN, elem=_INNER_ATTRIBUTES),
        "capacity": _Shape(_PER_DEVICE, key=_DOMAIN, elem=_INNER_CAPACITY),
    },
)


def _shape_size(path: tuple[str, ...]) -> Range | None:
    """The DRA size estimator: the declared size at ``path`` (``device`` first), or None."""
    if not path or path[0] != "device":
        return None
    node = _DEVICE
    for step in path[1:]:
        if step in ("@items", "@values"):
            nxt = node.elem
        elif step == "@keys":
            nxt = node.key
        elif node.fields is not None and step in node.fields:
            nxt = node.fields[step]
        elif node.elem is _ATTRIBUTE:  # an attribute map read as device.attributes[d].name
            nxt = _ATTRIBUTE
        else:
            nxt = None
        if nxt is None:
            return None
        node = nxt
    return Range(0, node.max_elements)


@dataclass(frozen=True, slots=True)
class _Entry:
    """Sizes of a container's keys (indices) and values, where the expression shows them."""

    kind: str  # "list" or "map"
    key: Range
    value: Range

    def union(self, other: _Entry | None) -> _Entry | None:
        if other is None:
            return None
        return _Entry(self.kind, self.key.union(other.key), self.value.union(other.value))


@dataclass(slots=True)
class _Local:
    path: tuple[str, ...] | None
    size: Range | None
    entry: _Entry | None


@dataclass(frozen=True, slots=True)
class CostReport:
    """The estimate of one expression: worst-case cost and the largest values it may build."""

    cost: Range
    largest_string: int  # characters (or bytes) of the largest string or bytes value built
    largest_list: int  # elements of the largest list or map built
    unbounded: str | None = None  # a call whose result size cannot be bounded, if any

    def problem(self) -> str | None:
        """Why the expression must be rejected, in the API server's words where it has some."""
        if self.cost.hi > MAX_COST:
            shown = "more than 2^64" if self.cost.hi >= _U64 else str(self.cost.hi)
            return f"too complex, exceeds cost limit: estimated cost {shown} exceeds the limit {MAX_COST}"
        if self.unbounded is not None:
            return f"too complex: the size of what {self.unbounded} returns cannot be bounded"
        if self.largest_string > MAX_STRING_SIZE:
            return (
                f"too complex: builds a string of up to {_shown(self.largest_string)} characters, "
                f"over the limit of {MAX_STRING_SIZE}"
            )
        if self.largest_list > MAX_LIST_SIZE:
            return (
                f"too complex: builds a list of up to {_shown(self.largest_list)} elements, "
                f"over the limit of {MAX_LIST_SIZE}"
            )
        return None


def _shown(value: int) -> str:
    return "more than 2^64" if value >= _U64 else str(value)


def estimate(ast: CheckedAst) -> CostReport:
    """The cost and size estimate of a checked DRA selector (see the module docstring)."""
    coster = _Coster(ast)
    cost = coster.cost(ast.root)
    return CostReport(cost, coster.largest_string, coster.largest_list, coster.unbounded)


@dataclass
class _Coster:
    ast: CheckedAst
    paths: dict[int, tuple[str, ...]] = field(default_factory=dict)
    sizes: dict[int, Range] = field(default_factory=dict)
    entries: dict[int, _Entry] = field(default_factory=dict)
    scopes: dict[str, list[_Local]] = field(default_factory=dict)
    largest_string: int = 0
    largest_list: int = 0
    unbounded: str | None = None

    # --- traversal ------------------------------------------------------------------------

    def cost(self, e: Expr) -> Range:
        if isinstance(e, Const):
            return ZERO
        if isinstance(e, Ident):
            return self._ident(e)
        if isinstance(e, Select):
            return self._select(e)
        if isinstance(e, Call):
            return self._call(e)
        if isinstance(e, ListLit):
            return self._list(e)
        if isinstance(e, MapLit):
            return self._map(e)
        if self._is_bind(e):
            return self._bind(e)
        return self._comprehension(e)

    def _ident(self, e: Ident) -> Range:
        local = self._peek(e.name)
        if local is not None:
            if local.path is not None:
                self.paths[e.id] = local.path
            return fixed(1)
        if e.name.startswith("device."):
            # Our variables are named "device.driver" etc.; Kubernetes reads device, then a field.
            self.paths[e.id] = tuple(e.name.split("."))
            return fixed(2)
        self.paths[e.id] = (e.name,)
        return fixed(1)

    def _select(self, e: Select) -> Range:
        if e.test_only:
            return fixed(1) + self.cost(e.operand)
        total = self.cost(e.operand)
        if self._type(e.operand).kind in ("map", "message", "type_param"):
            total = total + fixed(1)
        operand_path = self._path(e.operand)
        if operand_path is not None:
            self.paths[e.id] = (*operand_path, e.field)
        return total

    def _list(self, e: ListLit) -> Range:
        total = fixed(_LIST_CREATE)
        item = Range(0, 0) if not e.elements else Range(_U64, 0)
        for element in e.elements:
            total = total + self.cost(element)
            item = item.union(self.size_or_unknown(element))
        self.entries[e.id] = _Entry("list", fixed(1), item)
        self._note(e, fixed(len(e.elements)))
        return total

    def _map(self, e: MapLit) -> Range:
        total = fixed(_STRUCT_CREATE if e.message else _MAP_CREATE)
        key = value = Range(0, 0) if not e.entries else Range(_U64, 0)
        for k, v in e.entries:
            total = total + self.cost(k) + self.cost(v)
            key = key.union(self.size_or_unknown(k))
            value = value.union(self.size_or_unknown(v))
        if not e.message:
            self.entries[e.id] = _Entry("map", key, value)
            self._note(e, fixed(len(e.entries)))
        return total

    def _is_bind(self, e: Comprehension) -> bool:
        cond = e.loop_condition
        return (
            isinstance(e.iter_range, ListLit)
            and not e.iter_range.elements
            and isinstance(cond, Const)
            and cond.value is False
            and e.accu_var not in _ACCUMULATORS
        )

    def _bind(self, e: Comprehension) -> Range:
        total = self.cost(e.iter_range) + self.cost(e.accu_init)
        self._push(e.accu_var, e.accu_init)
        total = total + self.cost(e.result)
        self._pop(e.accu_var)
        self._copy_sizes(e, e.result)
        return total

    def _comprehension(self, e: Comprehension) -> Range:
        total = self.cost(e.iter_range) + self.cost(e.accu_init)
        self._push(e.accu_var, e.accu_init)
        if e.iter_var2:
            self._push_iter(e.iter_var, e.iter_range, keys=True)
            self._push_iter(e.iter_var2, e.iter_range, keys=False)
        else:
            self._push_iter(e.iter_var, e.iter_range, keys=None)
        per_iteration = self.cost(e.loop_condition) + self.cost(e.loop_step)
        self._pop(e.iter_var)
        if e.iter_var2:
            self._pop(e.iter_var2)
        total = total + self.cost(e.result)
        self._pop(e.accu_var)
        count = self.size_or_unknown(e.iter_range)
        total = total + count.times(per_iteration)
        if isinstance(e.accu_init, Const):
            size = self.size(e.accu_init)
            if size is not None:
                self.sizes[e.id] = size
        elif isinstance(e.accu_init, (ListLit, MapLit)):
            # map/filter: one element per iteration, each the size the step adds.
            step_entry = self.entries.get(e.loop_step.id)
            if step_entry is not None:
                self.entries[e.id] = step_entry
            self._note(e, count)
        return total

    # --- calls ------------------------------------------------------------------------------

    def _call(self, e: Call) -> Range:
        if e.function == "dyn" and e.args:
            arg_cost = self.cost(e.args[0])
            self._copy_sizes(e, e.args[0])
            return fixed(1) + arg_cost
        operands = ([e.target] if e.target is not None else []) + list(e.args)
        costs = [self.cost(o) for o in operands]
        overloads = self.ast.overloads.get(e.id, ())
        if not overloads:
            return self._sum(costs)
        total: Range | None = None
        result: Range | None = None
        for overload in overloads:
            call_cost, size = self._overload(e, overload, operands, costs)
            total = call_cost if total is None else total.union(call_cost)
            if size is not None:
                result = size if result is None else result.union(size)
        if result is None:
            result = self.size(e)
        if result is not None:
            self._note(e, result)
        elif self._type(e).kind in _STRINGS | _CONTAINERS and self.unbounded is None:
            self.unbounded = f"{e.function}()"
        return total or ZERO

    def _overload(
        self, e: Call, overload: str, operands: list[Expr], costs: list[Range]
    ) -> tuple[Range, Range | None]:
        """(cost including the operands, result size or None) of one overload."""
        size = self.size_or_unknown
        if overload in ("logical_and", "logical_or"):
            return Range(costs[0].lo, (costs[0] + costs[1]).hi), None
        if overload == "conditional":
            entry = self._entry(operands[1])
            if entry is not None:
                union = entry.union(self._entry(operands[2]))
                if union is not None:
                    self.entries[e.id] = union
            return costs[0] + costs[1].union(costs[2]), size(operands[1]).union(size(operands[2]))
        operand_cost = self._sum(costs)
        if overload in ("index_list", "index_map"):
            container = operands[0]
            entry = self._entry(container)
            suffix = "@items" if overload == "index_list" else "@values"
            container_path = self._path(container)
            if container_path is not None:
                self.paths[e.id] = (*container_path, suffix)
            return fixed(1) + operand_cost, entry.value if entry is not None else None
        model = _MODELS.get(overload)
        if model is None:
            return fixed(1) + operand_cost, _CONVERSION_SIZES.get(overload)
        call_cost, result = model(self, e, operands)
        return call_cost + operand_cost, result

    @staticmethod
    def _sum(costs: list[Range]) -> Range:
        total = ZERO
        for c in costs:
            total = total + c
        return total

    # --- sizes ------------------------------------------------------------------------------

    def size(self, e: Expr) -> Range | None:
        known = self.sizes.get(e.id)
        if known is not None:
            return known
        if isinstance(e, Const):
            value = e.value
            if isinstance(value, str):
                return fixed(len(value))
            if isinstance(value, bytes):
                return fixed(len(value))
            return fixed(1)
        if isinstance(e, Ident):
            local = self._peek(e.name)
            if local is not None and local.size is not None:
                return local.size
        path = self._path(e)
        if path is not None:
            declared = _shape_size(path)
            if declared is not None:
                return declared
        if self._type(e).kind in ("bool", "int", "uint", "double", "type", "null", "abstract"):
            return fixed(1)  # fixed-size values; quantities and semvers included
        return None

    def size_or_unknown(self, e: Expr) -> Range:
        return self.size(e) or UNKNOWN

    def element_size(self, e: Expr) -> Range:
        """Size of the elements (values) of the container ``e``."""
        entry = self._entry(e)
        if entry is not None:
            return entry.value
        path = self._path(e)
        kind = self._type(e).kind
        params = self._type(e).params
        if path is not None:
            declared = _shape_size((*path, "@values" if kind == "map" else "@items"))
            if declared is not None:
                return declared
        elem_type = params[-1] if params else None
        if elem_type is not None and elem_type.kind in ("bool", "int", "uint", "double"):
            return fixed(1)
        return UNKNOWN

    def _entry(self, e: Expr) -> _Entry | None:
        found = self.entries.get(e.id)
        if found is not None:
            return found
        if isinstance(e, Ident):
            local = self._peek(e.name)
            if local is not None:
                return local.entry
        return None

    def _note(self, e: Expr, size: Range) -> None:
        """Record the size of a value the expression builds, and the largest so far."""
        self.sizes[e.id] = size
        kind = self._type(e).kind
        if kind in _STRINGS:
            self.largest_string = max(self.largest_string, size.hi)
        elif kind in _CONTAINERS:
            self.largest_list = max(self.largest_list, size.hi)
            entry = self.entries.get(e.id)
            if entry is not None and self._holds_strings(e):
                held = size.times(Range(entry.value.lo, entry.value.hi))
                self.largest_string = max(self.largest_string, held.hi)

    def _holds_strings(self, e: Expr) -> bool:
        params = self._type(e).params
        return bool(params) and params[-1].kind in _STRINGS | _CONTAINERS | {"dyn"}

    def _copy_sizes(self, dst: Expr, src: Expr) -> None:
        size = self.size(src)
        if size is not None:
            self.sizes[dst.id] = size
        entry = self._entry(src)
        if entry is not None:
            self.entries[dst.id] = entry

    def _type(self, e: Expr) -> CelType:
        return self.ast.type_of(e)

    # --- scopes -----------------------------------------------------------------------------

    def _path(self, e: Expr) -> tuple[str, ...] | None:
        if isinstance(e, Ident):
            local = self._peek(e.name)
            if local is not None:
                return local.path
        return self.paths.get(e.id)

    def _peek(self, name: str) -> _Local | None:
        stack = self.scopes.get(name)
        return stack[-1] if stack else None

    def _push(self, name: str, e: Expr) -> None:
        self.scopes.setdefault(name, []).append(_Local(self._path(e), self.size(e), self._entry(e)))

    def _push_iter(self, name: str, range_expr: Expr, *, keys: bool | None) -> None:
        entry = self._entry(range_expr)
        kind = entry.kind if entry is not None else self._type(range_expr).kind
        if keys is None:  # one variable: list items, or map keys
            keys = kind != "list"
        if keys:
            size: Range | None = (entry.key if entry else None) if kind == "map" else fixed(1)
            suffix = "@keys" if kind == "map" else "@indices"
        else:
            size = entry.value if entry else None
            suffix = "@values" if kind == "map" else "@items"
        range_path = self._path(range_expr)
        path = (*range_path, suffix) if range_path is not None else None
        if size is None and path is not None:
            size = _shape_size(path)
        self.scopes.setdefault(name, []).append(_Local(path, size, None))

    def _pop(self, name: str) -> None:
        self.scopes[name].pop()


# --- function models ----------------------------------------------------------------------------
# Each returns (cost of the call itself, result size or None). Operands are receiver first.

_Model = Callable[["_Coster", Call, list[Expr]], tuple[Range, Range | None]]


def _traverse(factor: float = STRING_TRAVERSAL_COST_FACTOR, *, keeps_size: bool = False) -> _Model:
    def model(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
        size = c.size_or_unknown(ops[0])
        return size.scaled(factor), size if keeps_size else None

    return model


def _compare(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    a, b = c.size_or_unknown(ops[0]), c.size_or_unknown(ops[1])
    smallest = Range(min(a.lo, b.lo), min(a.hi, b.hi))
    return smallest.scaled(STRING_TRAVERSAL_COST_FACTOR), None


def _concat(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    size = c.size_or_unknown(ops[0]) + c.size_or_unknown(ops[1])
    return size.scaled(STRING_TRAVERSAL_COST_FACTOR), size


def _concat_lists(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    left, right = c._entry(ops[0]), c._entry(ops[1])
    if left is not None:
        union = left.union(right)
        if union is not None:
            c.entries[e.id] = union
    return fixed(1), c.size_or_unknown(ops[0]) + c.size_or_unknown(ops[1])


def _in_list(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    return c.size_or_unknown(ops[1]), None


def _contains(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    f = STRING_TRAVERSAL_COST_FACTOR
    return c.size_or_unknown(ops[0]).scaled(f).times(c.size_or_unknown(ops[1]).scaled(f)), None


def _matches(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    text = (c.size_or_unknown(ops[0]) + fixed(1)).scaled(STRING_TRAVERSAL_COST_FACTOR)
    return text.times(c.size_or_unknown(ops[1]).scaled(REGEX_STRING_LENGTH_COST_FACTOR)), None


def _replace(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    sz, old, new = (c.size_or_unknown(o) for o in ops[:3])
    if old.lo == 0:  # "" matches around every character
        count_hi, kept_hi = (sz.hi + 1 if sz.hi < _U64 else sz.hi), sz.hi
    elif new.hi <= old.lo:
        count_hi, kept_hi = 0, sz.hi
    else:
        count_hi, kept_hi = (_U64 if sz.hi >= _U64 else math.ceil(sz.hi / old.lo)), 0
    if old.hi == 0:
        count_lo, kept_lo = (sz.lo + 1 if sz.lo < _U64 else sz.lo), sz.lo
    elif old.hi <= new.lo:
        count_lo, kept_lo = 0, sz.lo
    else:
        count_lo, kept_lo = math.ceil(sz.lo / old.hi), 0
    result = Range(count_lo, count_hi).times(new) + Range(kept_lo, kept_hi)
    return sz.scaled(2 * STRING_TRAVERSAL_COST_FACTOR), result


def _split(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    sz = c.size_or_unknown(ops[0])
    most = sz.hi if sz.hi >= _U64 else sz.hi + 1
    if len(ops) > 2 and isinstance(ops[2], Const) and isinstance(ops[2].value, int) and ops[2].value >= 0:
        most = min(most, ops[2].value)
    return sz.scaled(2 * STRING_TRAVERSAL_COST_FACTOR), Range(0, most)


def _join(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    # Like Kubernetes, element sizes come from declared paths only (an attribute's list), not from
    # what the expression built: joining a list literal or a split is refused at admission.
    count = c.size_or_unknown(ops[0])
    path = c._path(ops[0])
    element = _shape_size((*path, "@items")) if path is not None else None
    size = count.times(element or UNKNOWN)
    if len(ops) > 1:
        separators = Range(max(count.lo - 1, 0), max(count.hi - 1, 0) if count.hi < _U64 else _U64)
        size = size + c.size_or_unknown(ops[1]).times(separators)
    return size.scaled(STRING_TRAVERSAL_COST_FACTOR), size


def _quote(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    sz = c.size_or_unknown(ops[0])
    quoted = sz.times(fixed(2)) + fixed(2)  # every character may need escaping, plus the quotes
    return sz.scaled(STRING_TRAVERSAL_COST_FACTOR), Range(sz.lo + 2, quoted.hi)


def _format(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    template = c.size_or_unknown(ops[0])
    args = ops[1] if len(ops) > 1 else None
    rendered = UNKNOWN
    if args is not None:
        # Each argument prints as at most its size plus room for a number, quotes or brackets.
        rendered = c.size_or_unknown(args).times(c.element_size(args) + fixed(32))
    return template.scaled(STRING_TRAVERSAL_COST_FACTOR), Range(0, (template + rendered).hi)


def _to_bytes(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    sz = c.size_or_unknown(ops[0])
    return sz.scaled(STRING_TRAVERSAL_COST_FACTOR), Range(sz.lo, sz.times(fixed(4)).hi)


def _single(c: _Coster, e: Call, ops: list[Expr]) -> tuple[Range, Range | None]:
    return fixed(1), fixed(1)


_MODELS: dict[str, _Model] = {
    # cel-go standard overloads
    "starts_with_string": _traverse(),
    "ends_with_string": _traverse(),
    "string_to_bytes": _to_bytes,
    "bytes_to_string": _traverse(keeps_size=True),
    "string_to_string": _traverse(keeps_size=True),
    "in_list": _in_list,
    "equals": _compare,
    "not_equals": _compare,
    "less_string": _compare,
    "less_equals_string": _compare,
    "greater_string": _compare,
    "greater_equals_string": _compare,
    "less_bytes": _compare,
    "less_equals_bytes": _compare,
    "greater_bytes": _compare,
    "greater_equals_bytes": _compare,
    "add_string": _concat,
    "add_bytes": _concat,
    "add_list": _concat_lists,
    "contains_string": _contains,
    "matches": _matches,
    "matches_string": _matches,
    # the strings extension, costed as k8s.io/apiserver/pkg/cel/library/cost.go does
    "string_lower_ascii": _traverse(keeps_size=True),
    "string_upper_ascii": _traverse(keeps_size=True),
    "string_substring_int": _traverse(keeps_size=True),
    "string_substring_int_int": _traverse(keeps_size=True),
    "string_trim": _traverse(keeps_size=True),
    "string_reverse": _traverse(keeps_size=True),
    "string_index_of_string": _traverse(),
    "string_index_of_string_int": _traverse(),
    "string_last_index_of_string": _traverse(),
    "string_last_index_of_string_int": _traverse(),
    "string_char_at_int": _single,
    "string_replace_string_string": _replace,
    "string_replace_string_string_int": _replace,
    "string_split_string": _split,
    "string_split_string_int": _split,
    "list_join": _join,
    "list_join_string": _join,
    "strings_quote": _quote,
    "string_format": _format,
    # the quantity and semver libraries: parsing traverses the string, the rest costs 1
    "string_to_quantity": _traverse(),
    "is_quantity_string": _traverse(),
    "string_to_semver": _traverse(),
    "string_bool_to_semver": _traverse(),
    "is_semver_string": _traverse(),
    "is_semver_string_bool": _traverse(),
}

# Results of unmodelled conversions to string: their longest printed form.
_CONVERSION_SIZES: dict[str, Range] = {
    "int64_to_string": Range(1, 20),
    "uint64_to_string": Range(1, 20),
    "double_to_string": Range(1, 32),
    "bool_to_string": Range(4, 5),
    "timestamp_to_string": Range(1, 40),
    "duration_to_string": Range(2, 40),
    "string_char_at_int": Range(0, 1),
    "type": fixed(1),
}


__all__ = [
    "MAX_COST",
    "MAX_LIST_SIZE",
    "MAX_STRING_SIZE",
    "CostReport",
    "Range",
    "estimate",
]
