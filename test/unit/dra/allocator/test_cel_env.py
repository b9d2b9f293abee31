"""The DRA CEL environment: Kubernetes' variables, libraries, errors and caching."""

from __future__ import annotations

import pytest
from alloc_builders import DRIVER, Cluster, a30_pool, claim, device, exact, mig_class
from k8s_fields import attributes_of
from kubernetes.client import V1DeviceAttribute

from pkg.dra.allocator import CelEnvironment, SelectorError
from pkg.dra.allocator.cel_env import CompiledSelector, DeviceInput, device_input

GPU = device(
    "gpu",
    attributes={"deviceType": "MIG", "nvidia.com/ccMajor": 8},
    capacity={"memory": "12032Mi"},
)
attributes_of(GPU)["driverVersion"] = V1DeviceAttribute(version="570.1.2+build")


@pytest.mark.parametrize(
    "expression",
    [
        f'device.driver == "{DRIVER}"',
        f'device.attributes["{DRIVER}"].deviceType == "MIG"',  # unqualified names: the driver's domain
        'device.attributes["nvidia.com"].ccMajor >= 8',
        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("10Gi")) > 0',
        f'device.capacity["{DRIVER}"].memory.isLessThan(quantity("12Gi"))',
        'quantity("1Gi") == quantity("1073741824") && quantity("1.5").add(1).asApproximateFloat() == 2.5',
        'quantity("50k").isInteger() && sign(quantity("-2")) == -1 && isQuantity("2Mi") && !isQuantity("x")',
        f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("570.1.0"))',
        f'device.attributes["{DRIVER}"].driverVersion == semver("570.1.2")',  # build metadata ignored
        'semver("v1.2", true).minor() == 2 && isSemver("1.0.0") && !isSemver("1.0")',
        "device.allowMultipleAllocations == false",
        'has(device.attributes["example.com"].x) == false',  # a missing domain is an empty map
        'cel.bind(m, device.attributes["nvidia.com"], m.ccMajor == 8)',
    ],
)
def test_kubernetes_selectors_hold(expression: str) -> None:
    env = CelEnvironment()
    assert env.matches(env.compile(expression), device_input(DRIVER, GPU)) is True


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (f'device.attributes["{DRIVER}"].missing == "x"', "missing"),  # no such key
        ('quantity("12Q").isInteger()', "12Q"),
        ('semver("1.0").major() == 1', "1.0"),
        (f'device.attributes["{DRIVER}"].deviceType', "bool"),
    ],
)
def test_runtime_errors(expression: str, message: str) -> None:
    env = CelEnvironment()
    with pytest.raises(SelectorError, match=message):
        env.matches(env.compile(expression), device_input(DRIVER, GPU))


@pytest.mark.parametrize(
    "expression",
    [
        'quantity("1") < quantity("2")',  # quantities only compare through functions
        'quantity("1").startsWith("1")',
        "device.unknown",
        '"x" + 1 == "x1"',
        # cost bound: 32^4 iterations over the attribute domains (the API server refuses it too)
        "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, "
        "device.attributes.all(d, true))))",
    ],
)
def test_compile_errors(expression: str) -> None:
    assert CelEnvironment().compile(expression).error is not None


def test_results_are_cached_per_device_and_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[CompiledSelector, DeviceInput]] = []
    original = CelEnvironment.matches

    def counting(self: CelEnvironment, selector: CompiledSelector, device: DeviceInput) -> bool:
        calls.append((selector, device))
        return original(self, selector, device)

    monkeypatch.setattr(CelEnvironment, "matches", counting)
    cluster = Cluster(a30_pool(), [mig_class("1g")])
    cluster.take("mig-1g")
    first = len(calls)
    cluster.take("mig-1g")
    assert first > 0
    assert len(calls) == first  # same slices: nothing evaluated again

    cluster.slices = a30_pool(generation=2)
    cluster.allocate(claim("c", exact("r", "mig-1g")))
    assert len(calls) == 2 * first  # new generation: every device evaluated again
