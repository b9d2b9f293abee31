"""The selector cost estimate: Kubernetes' figures, its verdicts, and bounded evaluation."""

from __future__ import annotations

import pytest
from kubernetes.client import V1Device, V1DeviceAttribute
from testutil.unit.dra.allocator.alloc_builders import DRIVER

from pkg.dra.allocator import CelEnvironment, SelectorError
from pkg.dra.allocator.cel_ast import read_checked
from pkg.dra.allocator.cel_cost import MAX_COST, MAX_LIST_SIZE, MAX_STRING_SIZE, CostReport, estimate
from pkg.dra.allocator.cel_env import device_input, input_problem

REPLACE = '.replace("a", "aaaaaaaaaaaaaaaa")'


def doubling(start: str, steps: int) -> str:
    """``cel.bind(v0, start, cel.bind(v1, v0 + v0, ...)) ... .size() > 0``: 2^steps times ``start``."""
    binds = "".join(f"cel.bind(v{i + 1}, v{i} + v{i}, " for i in range(steps))
    return f"cel.bind(v0, {start}, {binds}v{steps}.size() > 0" + ")" * (steps + 1)


def report(expression: str) -> CostReport:
    env = CelEnvironment()
    return estimate(read_checked(env._check_env.compile(expression).serialize()))


# Expected costs from k8s.io/dynamic-resource-allocation/cel compile_test.go (Kubernetes 1.37).
@pytest.mark.parametrize(
    ("expression", "cost"),
    [
        ('device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))', 6),
        ('"no-such-domain" in device.attributes', 3),
        ('device.driver == ""', 2),
        ('device.driver == "dra.example.com"', 4),
        ('device.attributes["dra.example.com"].name', 4),
        ('device.attributes["dra.example.com"]["name"]', 4),
        ('cel.bind(dra, device.attributes["dra.example.com"], dra.name)', 15),
        ('device.attributes["dra.example.com"].name > 0', 5),
        ('device.attributes["dra.example.com"].name == "fish"', 5),
        ('device.attributes["dra.example.com"].name.exists(x, x > 0)', 5 + (3 + 3) * 64),
    ],
)
def test_costs_are_the_kubernetes_figures(expression: str, cost: int) -> None:
    assert report(expression).cost.hi == cost


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        # 63 x 16^6 characters read by the last replace: the API server refuses it as well.
        ("device.driver" + REPLACE * 7 + ".size() > 0", "exceeds cost limit: estimated cost 225485789"),
        (
            "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, "
            "device.attributes.all(d, true))))",
            "exceeds cost limit",
        ),
        # the API server admits these (cost ~880k and ~52); the engine would build 66M characters
        # or 2^20 x 8 list elements, so the size limits refuse them
        ("device.driver" + REPLACE * 5 + ".size() > 0", "a string of up to 66060288 characters"),
        (doubling("[1,2,3,4,5,6,7,8]", 20), "a list of up to 8388608 elements"),
        # Kubernetes knows no element sizes of a list built in the expression: unbounded
        ('device.driver.split("").join(device.driver).size() > 1', "exceeds cost limit"),
    ],
)
def test_hostile_selectors_are_refused_with_the_reason(expression: str, message: str) -> None:
    compiled = CelEnvironment().compile(expression)
    assert compiled.error is not None
    assert message in compiled.error


def test_limits_follow_the_cost_model() -> None:
    assert MAX_COST == 1_000_000  # CELSelectorExpressionMaxCost
    assert MAX_STRING_SIZE == 10_000_000  # the cost limit / StringTraversalCostFactor (0.1)
    assert MAX_LIST_SIZE == 1_000_000  # one cost unit per element scanned


def test_an_admitted_selector_that_grows_strings_stays_small_and_fast() -> None:
    env = CelEnvironment()
    compiled = env.compile(doubling("device.driver", 13))  # up to 63 x 2^13 characters
    assert compiled.error is None
    assert env.matches(compiled, device_input(DRIVER, V1Device(name="d"))) is True


def test_the_iteration_budget_is_a_selector_error() -> None:
    ten = "[1,2,3,4,5,6,7,8,9,10]"
    expression = f"{ten}.all(a, {ten}.all(b, {ten}.all(c, {ten}.all(d, true))))"
    env = CelEnvironment()
    compiled = env.compile(expression)
    assert compiled.error is None  # cost 45551: Kubernetes admits and runs it
    with pytest.raises(SelectorError, match="budget of 10000 comprehension iterations"):
        env.matches(compiled, device_input(DRIVER, V1Device(name="d")))


def test_a_forged_quantity_string_is_not_a_quantity() -> None:
    env = CelEnvironment()
    forged = 'dyn("\\ue000' + "9" * 5000 + '").compareTo(quantity("1")) == 0'
    compiled = env.compile(forged)
    assert compiled.error is None
    with pytest.raises(SelectorError, match="no such overload"):
        env.matches(compiled, device_input(DRIVER, V1Device(name="d")))


def test_expression_length_is_counted_in_bytes_like_the_api() -> None:
    text = "true && " * 1000 + '"' + "й" * 3000 + '" != ""'  # under 10240 characters, over in bytes
    compiled = CelEnvironment().compile(text)
    assert compiled.error is not None
    assert "more than the limit of 10240 bytes" in compiled.error


@pytest.mark.parametrize(
    ("device", "problem"),
    [
        (V1Device(name="d", attributes={"s": V1DeviceAttribute(string="x" * 65)}), "longer than 64 bytes"),
        (
            V1Device(name="d", attributes={f"a{i}": V1DeviceAttribute(int=i) for i in range(33)}),
            "33 attributes and capacities",
        ),
        (V1Device(name="d", attributes={"l": V1DeviceAttribute(ints=list(range(49)))}), "49 values"),
        (V1Device(name="d", attributes={"x" * 33: V1DeviceAttribute(int=1)}), "is too long"),
    ],
)
def test_devices_beyond_the_api_sizes_are_refused(device: V1Device, problem: str) -> None:
    found = input_problem(DRIVER, device)
    assert found is not None
    assert problem in found
    assert device_input(DRIVER, device).error is not None
