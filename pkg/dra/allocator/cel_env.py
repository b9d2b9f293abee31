"""The DRA CEL environment: compile device selectors once, evaluate them against devices.

Semantics follow ``k8s.io/dynamic-resource-allocation/cel`` (Kubernetes 1.37):

* variables ``device.driver``, ``device.allowMultipleAllocations``, ``device.attributes`` and
  ``device.capacity``; the last two are maps keyed by **domain**, then by name, and an unqualified
  name belongs to the driver's domain (``device.attributes["gpu.deckhouse.io"].deviceType``);
* a missing *domain* reads as an empty map, a missing *name* is a runtime error ("no such key") that
  the allocator reports and that fails the claim, exactly like the scheduler;
* the quantity and semver libraries (:mod:`.cel_library`), the strings extension and ``cel.bind``;
* expressions longer than 10 KiB (``CELSelectorExpressionMaxLength``) are rejected, and so is one
  whose estimated worst-case cost exceeds 1,000,000 (``CELSelectorExpressionMaxCost``) or that may
  build a string or list larger than the cost limit could ever read (:mod:`.cel_cost`);
* evaluation is bounded at run time by the engine's budget of 10,000 comprehension iterations
  per evaluation, and every failure to evaluate — a CEL error, the budget, an exception of a
  library function, memory — is a :class:`SelectorError`, never an exception of another type.

Engine choice, by measurement (``test/bench/cel_engines.py`` on the 2-core project machine,
Python 3.11, the typical selector ``device.driver == … && device.attributes[…].deviceType == "MIG"
&& device.capacity[…].memory.compareTo(quantity("10Gi")) >= 0``; µs per evaluation with the
device's variables reused / built afresh):

================================  ==========  ===============  ===================================
engine                            reused      fresh            notes
================================  ==========  ===============  ===================================
cel-expr-python 0.1.3 (C++)       3.9         10.9             type-checker, strings/bindings ext
common-expression-language 0.10   4.2         37.0             Rust; no type-checker
cel-python 0.5 (pure Python)      473         421              custom types, but ~100x slower
================================  ==========  ===============  ===================================

We use **cel-expr-python**: fastest per device, and the only one with a type-checker, so selectors
Kubernetes rejects at compile time are rejected here too. Its one gap — no run-time values of
custom types — is bridged in :mod:`.cel_library` (check with abstract types, run with canonical
tagged strings).

Known differences from cel-go (none affects the selectors we generate or document):

* a missing domain is emulated by adding an empty map for every domain the expression names
  literally (``device.attributes["x"]``, ``device.capacity.x``); so ``"x" in device.attributes``
  is true here when the same expression also indexes ``x``, and false in Kubernetes;
* comparing a version attribute with a plain string (``… .driverVersion == "1.2.3"``) is false
  here and a "no such overload" error in Kubernetes;
* the cost bound is cel-go's *estimate* (the check the API server makes at admission), not
  cel-go's run-time cost tracking, which the engine lacks; an admitted expression cannot cost more
  than its estimate, and the iteration budget is a second, run-time bound. Expressions that may
  build oversized strings or lists are rejected here although the API server admits them;
* the Kubernetes ``lists``, ``sets``, ``regex``, ``url``, ``ip``, ``cidr`` and ``format``
  libraries are not provided: using them is a compile error, reported like any other;
* the engine's parser nests at most 32 levels (cel-go's allows far deeper), and it runs at most
  10,000 comprehension iterations per evaluation (cel-go counts cost instead): a selector beyond
  either is a compile error or a selector error here although the API server admits it.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]  # ships .pyi without py.typed
from cel_expr_python.ext.ext_bindings import ExtBindings  # type: ignore[import-untyped]
from cel_expr_python.ext.ext_strings import ExtStrings  # type: ignore[import-untyped]
from kubernetes.client import V1Device

from pkg.dra.allocator.cel_ast import AstError, read_checked
from pkg.dra.allocator.cel_cost import (
    DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH,
    DEVICE_MAX_DOMAIN_LENGTH,
    DEVICE_MAX_ID_LENGTH,
    DRIVER_NAME_MAX_LENGTH,
    MAX_ATTRIBUTE_VALUES_PER_DEVICE,
    MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
    estimate,
)
from pkg.dra.allocator.cel_footprint import Footprint, footprint
from pkg.dra.allocator.cel_library import FUNCTIONS, encode_quantity, encode_semver
from pkg.dra.allocator.quantity import QuantityError, parse_quantity
from pkg.dra.allocator.semver import SemverError, parse_semver

MAX_EXPRESSION_LENGTH = 10 * 1024  # k8s.io/api/resource/v1 CELSelectorExpressionMaxLength
ITERATION_BUDGET = 10_000  # the engine's comprehension iterations per evaluation (cel-cpp default)
# device.attributes["domain"] / device.capacity.domain: literal domains that must read as {}.
_DOMAIN_REF = re.compile(
    r"device\s*\.\s*(?:attributes|capacity)\s*(?:\[\s*(?:\"([^\"\\]*)\"|'([^'\\]*)')\s*\]|\.\s*([A-Za-z_]\w*))"
)
_VARIABLES = ("device.driver", "device.allowMultipleAllocations", "device.attributes", "device.capacity")


class SelectorError(Exception):
    """A selector failed to compile or to evaluate; the message is the CEL error."""


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    expression: str
    program: Any  # cel.Expression; None when ``error`` is set
    error: str | None
    domains: frozenset[str]
    reads: Footprint | None = None  # what its verdict depends on, when provably little (.cel_footprint)


@dataclass(slots=True)
class DeviceInput:
    """A device as CEL variables, built once per device and slice generation."""

    data: dict[str, Any]
    domains: frozenset[str]
    error: str | None = None
    activation: Any = field(default=None)


def _types(quantity: Any, semver: Any) -> dict[str, Any]:
    return {
        "Q": quantity,
        "S": semver,
        "string": cel.Type.STRING,
        "int": cel.Type.INT,
        "bool": cel.Type.BOOL,
        "double": cel.Type.DOUBLE,
    }


def _new_env(*, checking: bool) -> Any:
    if checking:
        kinds = _types(
            cel.Type.AbstractType("kubernetes.Quantity"), cel.Type.AbstractType("kubernetes.Semver")
        )
    else:
        kinds = _types(cel.Type.STRING, cel.Type.STRING)
    overloads: dict[str, list[Any]] = {}
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for spec in FUNCTIONS:
        params = [kinds[p] for p in spec.params]
        runtime_key = (spec.name, tuple(p.name() for p in params))
        if runtime_key in seen:  # e.g. compareTo(Q,Q) and compareTo(S,S) are one string overload
            continue
        seen.add(runtime_key)
        extra = {} if checking else {"impl": spec.impl}
        overloads.setdefault(spec.name, []).append(
            cel.Overload(spec.overload_id, kinds[spec.result], params, is_member=spec.member, **extra)
        )
    inner = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    variables = {
        "device.driver": cel.Type.STRING,
        "device.allowMultipleAllocations": cel.Type.BOOL,
        "device.attributes": cel.Type.Map(cel.Type.STRING, inner),
        "device.capacity": cel.Type.Map(cel.Type.STRING, cel.Type.Map(cel.Type.STRING, kinds["Q"])),
    }
    return cel.NewEnv(
        variables=variables,
        extensions=[ExtStrings(), ExtBindings()],
        functions=[cel.FunctionDecl(name, decls) for name, decls in overloads.items()],
    )


class CelEnvironment:
    """Compiles selectors (cached per expression) and evaluates them. Thread-safe."""

    def __init__(self) -> None:
        self._check_env = _new_env(checking=True)
        self._run_env = _new_env(checking=False)
        self._compiled: dict[str, CompiledSelector] = {}
        self._lock = threading.Lock()

    def compile(self, expression: str) -> CompiledSelector:
        compiled = self._compiled.get(expression)
        if compiled is None:
            compiled = self._compile(expression)
            with self._lock:
                self._compiled[expression] = compiled
        return compiled

    def _compile(self, expression: str) -> CompiledSelector:
        domains = frozenset(a or b or c for a, b, c in _DOMAIN_REF.findall(expression))
        size = len(expression.encode("utf-8", errors="surrogatepass"))
        if size > MAX_EXPRESSION_LENGTH:
            error = f"expression is {size} bytes long, more than the limit of {MAX_EXPRESSION_LENGTH} bytes"
            return CompiledSelector(expression, None, error, domains)
        try:
            checked = self._check_env.compile(expression)
            result_type = checked.return_type()
            if result_type not in (cel.Type.BOOL, cel.Type.DYN):
                raise SelectorError(f"must evaluate to bool or the unknown type, not {result_type.name()}")
            ast = read_checked(checked.serialize())
            problem = estimate(ast).problem()
            if problem is not None:
                return CompiledSelector(expression, None, problem, domains)
            program = self._run_env.compile(expression)
        except (RuntimeError, SelectorError) as err:
            return CompiledSelector(expression, None, f"compilation failed: {err}", domains)
        except AstError as err:  # the engine's own output we cannot read: refuse rather than guess
            return CompiledSelector(expression, None, f"cost estimation failed: {err}", domains)
        return CompiledSelector(expression, program, None, domains, footprint(ast))

    def matches(self, selector: CompiledSelector, device: DeviceInput) -> bool:
        """True/False, or :class:`SelectorError` for compile errors and every failure to evaluate."""
        if selector.error is not None:
            raise SelectorError(selector.error)
        if device.error is not None:
            raise SelectorError(device.error)
        try:
            if selector.domains <= device.domains:
                if device.activation is None:
                    device.activation = self._run_env.Activation(data=device.data)
                value = selector.program.eval(device.activation)
            else:
                value = selector.program.eval(data=_with_empty_domains(device, selector.domains))
            result = value.value()
        except MemoryError:
            raise SelectorError("evaluation ran out of memory") from None
        except RuntimeError as err:
            raise SelectorError(_runtime_error(err)) from None
        except Exception as err:  # the engine surfaces a library function's failure as-is
            raise SelectorError(f"evaluation failed: {type(err).__name__}: {err}") from None
        if type(result) is bool:
            return result
        if value.type() == cel.Type.ERROR:
            raise SelectorError(str(result))
        raise SelectorError(f"CEL result of type {value.type().name()} could not be converted to bool")


def _runtime_error(err: RuntimeError) -> str:
    text = str(err)
    if "Iteration budget exceeded" in text:
        return f"evaluation exceeded the budget of {ITERATION_BUDGET} comprehension iterations"
    return text


def _with_empty_domains(device: DeviceInput, domains: frozenset[str]) -> dict[str, Any]:
    data = dict(device.data)
    missing = domains - device.domains
    data["device.attributes"] = {**device.data["device.attributes"], **{d: {} for d in missing}}
    data["device.capacity"] = {**device.data["device.capacity"], **{d: {} for d in missing}}
    return data


def input_problem(driver: str, device: V1Device) -> str | None:
    """Why ``device`` breaks a size the API server enforces on every ResourceSlice, or None.

    The cost estimate assumes these sizes (:mod:`.cel_cost`); a device from a bundle, or from a
    server that did not enforce them, could otherwise make an admitted selector cost more.

    Every device of every pool passes through here when the allocator builds its pools (224 000
    at 1000 nodes), so the common case is kept cheap: names already seen within bounds are
    remembered, and a string is encoded only when its length in characters could exceed the
    byte limit (a character is at most 4 bytes in UTF-8).
    """
    if len(driver) > DRIVER_NAME_MAX_LENGTH:
        return f"driver name longer than {DRIVER_NAME_MAX_LENGTH} characters"
    attributes, capacity = device.attributes or {}, device.capacity or {}
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE:
        return (
            f"{len(attributes) + len(capacity)} attributes and capacities, "
            f"more than {MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE}"
        )
    for names in (attributes, capacity):
        for name in names:
            if name not in _NAMES_WITHIN_BOUNDS and (problem := _name_problem(name)) is not None:
                return problem
    values = 0
    for name, attr in attributes.items():
        for text in (attr.string, attr.version):
            if text is not None and _too_long(text):
                return f"attribute {name}: a value longer than {DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH} bytes"
        for texts in (attr.strings, attr.versions):
            if texts:
                values += len(texts)
                if any(_too_long(t) for t in texts if t is not None):
                    return f"attribute {name}: a value longer than {DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH} bytes"
        values += len(attr.ints or ()) + len(attr.bools or ())
    if values > MAX_ATTRIBUTE_VALUES_PER_DEVICE:
        return f"{values} values in list attributes, more than {MAX_ATTRIBUTE_VALUES_PER_DEVICE}"
    return None


_NAMES_WITHIN_BOUNDS: set[str] = set()  # qualified names seen within bounds; bounded, cleared when full
_MAX_REMEMBERED_NAMES = 10_000


def _name_problem(name: str) -> str | None:
    domain, _, ident = name.rpartition("/")
    if len(domain) > DEVICE_MAX_DOMAIN_LENGTH or len(ident) > DEVICE_MAX_ID_LENGTH:
        limits = f"at most {DEVICE_MAX_DOMAIN_LENGTH} for the domain, {DEVICE_MAX_ID_LENGTH} for the name"
        return f"name {name[:100]!r} is too long ({limits})"
    if len(_NAMES_WITHIN_BOUNDS) >= _MAX_REMEMBERED_NAMES:
        _NAMES_WITHIN_BOUNDS.clear()
    _NAMES_WITHIN_BOUNDS.add(name)
    return None


def _too_long(text: str) -> bool:
    limit = DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH
    return len(text) > limit // 4 and len(text.encode()) > limit


def device_input(driver: str, device: V1Device) -> DeviceInput:
    """The CEL variables of one device (unqualified names go to the driver's domain)."""
    attributes: dict[str, dict[str, Any]] = {}
    capacity: dict[str, dict[str, Any]] = {}
    error = None
    if (problem := input_problem(driver, device)) is not None:
        error = f"device {device.name}: {problem}"
    try:
        for name, attr in (device.attributes or {}).items():
            domain, _, ident = name.rpartition("/")
            attributes.setdefault(domain or driver, {})[ident] = _attribute_value(attr)
        for name, cap in (device.capacity or {}).items():
            domain, _, ident = name.rpartition("/")
            capacity.setdefault(domain or driver, {})[ident] = encode_quantity(parse_quantity(cap.value))
    except (QuantityError, SemverError, ValueError) as err:
        error = error or f"device {device.name}: {err}"
    data = {
        "device.driver": driver,
        "device.allowMultipleAllocations": bool(device.allow_multiple_allocations),
        "device.attributes": attributes,
        "device.capacity": capacity,
    }
    return DeviceInput(data=data, domains=frozenset(attributes) | frozenset(capacity), error=error)


def _attribute_value(attr: Any) -> Any:
    for list_field in ("ints", "bools", "strings"):
        if (values := getattr(attr, list_field)) is not None:
            return list(values)
    if attr.versions is not None:
        return [encode_semver(parse_semver(v)) for v in attr.versions]
    for scalar in ("int", "bool", "string"):
        if (value := getattr(attr, scalar)) is not None:
            return value
    if attr.version is not None:
        return encode_semver(parse_semver(attr.version))
    raise ValueError("unsupported attribute value")


__all__ = [
    "CelEnvironment",
    "CompiledSelector",
    "DeviceInput",
    "SelectorError",
    "device_input",
    "input_problem",
]
