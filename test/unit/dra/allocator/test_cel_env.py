"""The DRA CEL environment: Kubernetes' variables, libraries, errors and caching."""

from __future__ import annotations

import pytest
from kubernetes.client import V1DeviceAttribute
from testutil.k8s_fields import attributes_of
from testutil.unit.dra.allocator.alloc_builders import (
    DRIVER,
    Cluster,
    a30_pool,
    claim,
    device,
    device_class,
    exact,
    mig_class,
    resource_slice,
)

from pkg.dra.allocator import CelEnvironment, SelectorError
from pkg.dra.allocator.cel_env import CompiledSelector, DeviceInput, device_input
from pkg.dra.allocator.cel_footprint import device_key, plain_attributes
from pkg.dra.model import Unschedulable

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


def _count_evaluations(monkeypatch: pytest.MonkeyPatch) -> list[tuple[CompiledSelector, DeviceInput]]:
    calls: list[tuple[CompiledSelector, DeviceInput]] = []
    original = CelEnvironment.matches

    def counting(self: CelEnvironment, selector: CompiledSelector, device: DeviceInput) -> bool:
        calls.append((selector, device))
        return original(self, selector, device)

    monkeypatch.setattr(CelEnvironment, "matches", counting)
    return calls


# Reads the whole domain map ("in"): no footprint, so verdicts are cached per device and version.
OPAQUE = f'"migProfile" in device.attributes["{DRIVER}"] && device.attributes["{DRIVER}"].migProfile == "1g"'


def test_opaque_results_are_cached_per_device_and_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_evaluations(monkeypatch)
    cluster = Cluster(a30_pool(), [device_class("opaque", OPAQUE)])
    cluster.take("opaque")
    first = len(calls)
    cluster.take("opaque")
    assert first > 0
    assert len(calls) == first  # same slices: nothing evaluated again

    cluster.slices = a30_pool(generation=2)
    cluster.allocate(claim("c", exact("r", "opaque")))
    assert len(calls) == 2 * first  # new generation: every device evaluated again


def test_footprint_results_are_cached_per_distinct_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """The class reads the driver, deviceType and migProfile: one evaluation per distinct triple,
    however many devices and generations share it, with the same decisions as per device."""
    calls = _count_evaluations(monkeypatch)
    slices = [*a30_pool("node-a"), *a30_pool("node-b", card="gpu-0000-03-00-0")]
    cluster = Cluster(slices, [mig_class("1g")])
    taken = [name for _ in range(4) for name in cluster.take("mig-1g")]
    assert len(set(taken)) == 4  # a 1g offer for each claim, never one twice
    kinds = {
        (str(d.attributes["deviceType"].string), str(getattr(d.attributes.get("migProfile"), "string", "")))
        for rs in slices
        for d in rs.spec.devices or ()
        if d.attributes
    }
    devices = sum(len(rs.spec.devices or ()) for rs in slices)
    assert 0 < len(calls) <= len(kinds) < devices  # once per distinct (deviceType, migProfile)
    first = len(calls)

    cluster.slices = [*a30_pool(generation=2), *a30_pool("node-b", card="gpu-0000-03-00-0")]
    cluster.allocate(claim("c", exact("r", "mig-1g")))
    assert len(calls) == first  # a new generation with the same values: nothing evaluated again


@pytest.mark.parametrize(
    ("expression", "reads"),
    [
        (f'device.driver == "{DRIVER}"', (True, False, ())),
        (
            f'device.attributes["{DRIVER}"].deviceType == "MIG" && device.allowMultipleAllocations',
            (False, True, ((DRIVER, "deviceType"),)),
        ),
        (
            'has(device.attributes["nvidia.com"].ccMajor) && device.attributes["nvidia.com"]["ccMajor"] > 7',
            (False, False, (("nvidia.com", "ccMajor"),)),
        ),
        # Anything else that touches the device: no footprint, evaluated per device.
        (f'device.capacity["{DRIVER}"].memory.isLessThan(quantity("12Gi"))', None),
        (f'"x" in device.attributes["{DRIVER}"]', None),
        ('cel.bind(m, device.attributes["nvidia.com"], m.ccMajor == 8)', None),
        ("device.attributes.exists(d, d == 'a')", None),
        (f'device.attributes["{DRIVER}"]["device" + "Type"] == "MIG"', None),
    ],
)
def test_footprint_names_what_a_selector_reads(
    expression: str, reads: tuple[bool, bool, tuple[tuple[str, str], ...]] | None
) -> None:
    found = CelEnvironment().compile(expression).reads
    assert (None if found is None else (found.driver, found.multi, found.attributes)) == reads


def test_footprint_key_sees_short_and_qualified_names() -> None:
    env = CelEnvironment()
    reads = env.compile(f'device.attributes["{DRIVER}"].deviceType == "MIG"').reads
    assert reads is not None
    short = device("a", attributes={"deviceType": "MIG"})
    qualified = device("b", attributes={f"{DRIVER}/deviceType": "MIG"})
    other = device("c", attributes={"deviceType": "Physical"})
    keys = {name: device_key(reads, DRIVER, d) for name, d in (("a", short), ("b", qualified), ("c", other))}
    assert len(set(keys.values())) == 3  # each seen as written: never merged with a different value
    assert device_key(reads, DRIVER, device("d", attributes={"deviceType": "MIG"})) == keys["a"]


def test_devices_whose_input_fails_are_never_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad version elsewhere on the device fails its whole CEL input, naming it: such a device is
    evaluated on its own, even when the values the selector reads equal another device's."""
    good = device("good", attributes={"deviceType": "MIG"})
    bad = device("bad", attributes={"deviceType": "MIG"})
    attributes_of(bad)["driverVersion"] = V1DeviceAttribute(version="not-semver")
    assert plain_attributes(good)
    assert not plain_attributes(bad)
    slices = [resource_slice("s", pool="p", devices=[good, bad])]
    result = Cluster(slices, [device_class("any", f'device.attributes["{DRIVER}"].deviceType == "MIG"')])
    outcome = result.allocate(claim("c", exact("r", "any", count=2)))
    assert isinstance(outcome, Unschedulable)
    assert outcome.fatal
    assert "bad" in outcome.reason + " ".join(outcome.errors)
