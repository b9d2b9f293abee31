"""Families 1 and 2: CEL selectors never run unbounded, and every failure is a selector error.

Selectors are generated from the operations that grow strings and lists — ``replace`` with any
search and replacement, ``+``, ``cel.bind`` doubling, ``split``/``join``, ``format``, ``map`` over
literal lists — chained up to a dozen deep, and from arbitrary text. Each is compiled and, when
admitted, evaluated against a device with every attribute at the API's maximum size, in a child
process with a memory, CPU and wall-clock bound (:mod:`bounded`). The property: the answer is a
compile error, ``True``/``False`` or a :class:`SelectorError` — never another exception, a crash,
or a bound broken. Through the allocator, a failing selector fails the claim with a message
naming the class, the selector and the device.
"""

from __future__ import annotations

import pytest
from cel_expr_python import cel  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1CELDeviceSelector,
    V1Device,
    V1DeviceAttribute,
    V1DeviceClaim,
    V1DeviceClass,
    V1DeviceClassSpec,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1ResourceClaimSpec,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)
from pytest_mock import MockerFixture
from testutil.unit.hostile.bounded import run_bounded

from pkg.dra.allocator import Allocator, CelEnvironment, SelectorError, Unschedulable
from pkg.dra.allocator.cel_env import device_input

DRIVER = "gpu.deckhouse.io"
LONG_DRIVER = "d" * 45 + ".deckhouse.io" + "x" * 5  # 63 characters, the API's maximum


def biggest_device() -> V1Device:
    """A device at the API's limits: 32 attributes, 64-character strings, a 48-value list."""
    attributes = {f"s{i}": V1DeviceAttribute(string=chr(97 + i % 26) * 64) for i in range(30)}
    attributes["n"] = V1DeviceAttribute(int=2**63 - 1)
    attributes["l"] = V1DeviceAttribute(ints=list(range(48)))
    return V1Device(name="big", attributes=attributes)


_piece = st.text(alphabet="ab%s,", max_size=64).map(lambda t: t.replace('"', ""))
_STRING_START = st.sampled_from(
    ["device.driver", '""', '"a"', f'device.attributes["{DRIVER}"].s0', '"' + "a" * 64 + '"']
)


@st.composite
def grown_string(draw: st.DrawFn) -> str:
    """A string expression built by chaining growth operations."""
    expr = draw(_STRING_START)
    for step, op in enumerate(draw(st.lists(st.integers(0, 8), max_size=12))):
        if op == 0:
            expr = f'{expr}.replace("{draw(_piece)}", "{draw(_piece)}")'
        elif op == 1:
            expr = f"({expr} + {expr})"
        elif op == 2:
            expr = f"cel.bind(v{step}, {expr}, v{step} + v{step})"
        elif op == 3:
            expr = f'{expr}.split("{draw(_piece)}").join("{draw(_piece)}")'
        elif op == 4:
            expr = f'[{expr}, {expr}].join("{draw(_piece)}")'
        elif op == 5:
            expr = f'"%s%s".format([{expr}, {expr}])'
        elif op == 6:
            items = ",".join(str(i) for i in range(draw(st.integers(0, 200))))
            expr = f'[{items}].map(x, {expr}).join("")'
        elif op == 7:
            expr = f"{expr}.lowerAscii().trim()"
        else:
            expr = f"{expr}.substring(0)"
    return expr


@st.composite
def grown_list(draw: st.DrawFn) -> str:
    """A list expression built by doubling, nesting and mapping."""
    expr = draw(st.sampled_from(["[1]", "[1,2,3,4,5,6,7,8]", f'device.attributes["{DRIVER}"].l', "[]"]))
    for step, op in enumerate(draw(st.lists(st.integers(0, 3), max_size=24))):
        if op == 0:
            expr = f"cel.bind(w{step}, {expr}, w{step} + w{step})"
        elif op == 1:
            expr = f"({expr} + {expr})"
        elif op == 2:
            expr = f"{expr}.map(x, x)"
        else:
            expr = f"{expr}.filter(x, true)"
    return expr


ENV = CelEnvironment()  # built once (0.1 s); each bounded child works on its own copy


def _verdict(expression: str) -> str:
    env = ENV
    compiled = env.compile(expression)
    if compiled.error is not None:
        return f"rejected: {compiled.error}"
    try:
        return str(env.matches(compiled, device_input(LONG_DRIVER, biggest_device())))
    except SelectorError as err:
        return f"selector error: {err}"


@given(grown_string(), st.sampled_from([".size() > 0", ' == "q"', '.contains("ab")', '.startsWith("a")']))
def test_growing_strings_are_refused_or_evaluated_within_bounds(expression: str, test: str) -> None:
    verdict = run_bounded(_verdict, expression + test)
    assert verdict.startswith(("rejected: ", "True", "False", "selector error: ")), verdict


@given(grown_list(), st.sampled_from([".size() > 0", ".exists(x, x == 3)", ".all(x, x >= 0)", " == []"]))
def test_growing_lists_are_refused_or_evaluated_within_bounds(expression: str, test: str) -> None:
    verdict = run_bounded(_verdict, expression + test)
    assert verdict.startswith(("rejected: ", "True", "False", "selector error: ")), verdict


@given(st.text(max_size=300))
def test_any_text_compiles_to_a_selector_or_an_error(text: str) -> None:
    verdict = run_bounded(_verdict, text)
    assert verdict.startswith(("rejected: ", "True", "False", "selector error: ")), verdict


@given(st.text(alphabet="0123456789eE+-.kMGTPEimnu", max_size=40))
def test_quantity_functions_in_selectors_answer_in_bounded_time(text: str) -> None:
    verdict = run_bounded(_verdict, f'isQuantity("{text}") || sign(quantity("{text}")) == 0')
    assert verdict.startswith(("True", "False", "selector error: ")), verdict


def _allocate_with(expression: str) -> tuple[str, str]:
    device_class = V1DeviceClass(
        metadata=V1ObjectMeta(name="hostile"),
        spec=V1DeviceClassSpec(selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=expression))]),
    )
    slice_ = V1ResourceSlice(
        metadata=V1ObjectMeta(name="s", resource_version="1"),
        spec=V1ResourceSliceSpec(
            driver=DRIVER,
            pool=V1ResourcePool(name="p", generation=1, resource_slice_count=1),
            node_name="node-a",
            devices=[biggest_device()],
        ),
    )
    claim = ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name="c", namespace="ns", uid="u"),
        spec=V1ResourceClaimSpec(
            devices=V1DeviceClaim(
                requests=[
                    V1DeviceRequest(name="r", exactly=V1ExactDeviceRequest(device_class_name="hostile"))
                ]
            )
        ),
    )
    outcome = Allocator(env=ENV).allocate(claim, slices=[slice_], classes=[device_class], allocated_claims=[])
    if isinstance(outcome, Unschedulable):
        return ("fatal" if outcome.fatal else "unschedulable", str(outcome))
    return ("allocated", "")


@given(
    st.sampled_from(
        [
            f'device.attributes["{DRIVER}"].missing == 1',  # no such key
            "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10]"
            ".all(c, [1,2,3,4,5,6,7,8,9,10].all(d, true))))",  # the engine's iteration budget
            'quantity("12Q").isInteger()',
            'dyn("\\ue000' + "9" * 5000 + '").compareTo(quantity("1")) == 0',
            'semver("' + "9" * 5000 + '.0.0").major() == 1',
        ]
    )
)
def test_a_failing_selector_fails_the_claim_naming_class_selector_and_device(expression: str) -> None:
    kind, message = run_bounded(_allocate_with, expression)
    assert kind == "fatal", message
    assert "class hostile: selector #0 on device gpu.deckhouse.io/p/big" in message


@pytest.mark.parametrize(
    "expression",
    [
        f'device.driver == "{DRIVER}"',  # the device's own variables: the cached activation
        'device.attributes["other.example.com"].x == 1',  # a domain the device lacks: variables built anew
    ],
)
def test_a_selector_that_runs_out_of_memory_fails_the_claim_naming_class_selector_and_device(
    expression: str, mocker: MockerFixture
) -> None:
    """A real exhaustion cannot be forced within the suite's bounds, so the engine's evaluation raises
    it: the allocator must report it as it reports every other runtime error, never let it escape."""
    evaluate = mocker.patch.object(cel.Expression, "eval", autospec=True, side_effect=MemoryError)
    kind, message = _allocate_with(expression)
    assert evaluate.called  # the failure came from evaluating, not from compiling or the device
    assert kind == "fatal", message
    assert (
        "class hostile: selector #0 on device gpu.deckhouse.io/p/big: CEL runtime error: "
        "evaluation ran out of memory"
    ) in message
