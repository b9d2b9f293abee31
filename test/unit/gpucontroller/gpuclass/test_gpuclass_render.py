"""GPUClass → DeviceClass: the generated CEL selects exactly the intended offers.

Each selector is evaluated with the project's CEL environment (Kubernetes DRA semantics: attributes
by domain, the quantity library, missing keys are errors) against the offers gpu-handler publishes
for real cards (``build_offers``), so a clause that is wrong, or a key read without a guard, fails
here rather than in the scheduler. The real API server and scheduler check the same classes in
``test/integration/test_gpuclass_controller.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta
from testutil.k8s_fields import meta, name_of, present, spec_of

from api.gpu.v1alpha1 import GPUClass, parse_gpu_config
from pkg.domain.names import DRIVER
from pkg.dra.allocator.cel_env import CelEnvironment, SelectorError, device_input
from pkg.dra.model.card import Card, MigProfileSpec, Placement, VgpuTypeSpec
from pkg.dra.model.offers import build_offers
from pkg.gpucontroller.gpuclass.render import (
    cel_string,
    default_extended_resource_name,
    device_class,
    extended_resource_name,
    selector_expression,
)

A30 = Card(
    physical_gpu="n1-0-10de-20b7",
    pci_address="0000:3b:00.0",
    product_name="NVIDIA A30",
    device="a30-pcie",
    memory_mib=24576,
    compute_capability="8.0",
    uuid="GPU-a30",
    mig_profiles=(
        MigProfileSpec(14, "1g.6gb", 5952, 1, (Placement(0, 1), Placement(3, 1))),
        MigProfileSpec(5, "2g.12gb", 11968, 2, (Placement(0, 2), Placement(2, 2))),
    ),
)
L4 = Card(
    physical_gpu="n1-1-10de-27b8",
    pci_address="0000:ca:00.0",
    product_name="NVIDIA L4",
    device="l4",
    memory_mib=23034,
    compute_capability="8.9",
    uuid="GPU-l4",
    mig_allowed=False,
)
# A card NVML has not described: no uuid, no compute capability attributes.
BARE = Card(
    physical_gpu="n1-2-10de-2330",
    pci_address="0000:1b:00.0",
    product_name="H100",
    device="h100",
    memory_mib=81920,
)
CEL = CelEnvironment()


def gpu_class(name: str = "cls", **spec: Any) -> GPUClass:
    return GPUClass.from_api_dict(
        {
            "metadata": {"name": name, "uid": "u-1"},
            "spec": {"vendor": "Nvidia", "deviceType": "Physical", **spec},
        }
    )


def selected(gpu_class_: GPUClass, uuids: list[str] | None = None) -> set[str]:
    selector = CEL.compile(selector_expression(gpu_class_, uuids))
    return {
        offer.name
        for card in (A30, L4, BARE)
        for offer in build_offers(card).offers
        if CEL.matches(selector, device_input(DRIVER, offer.device))
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, {"gpu-0000-3b-00-0", "gpu-0000-ca-00-0", "gpu-0000-1b-00-0"}),
        (
            {"sharing": {"strategy": "TimeSlicing"}},
            {"gpu-0000-3b-00-0-ts", "gpu-0000-ca-00-0-ts", "gpu-0000-1b-00-0-ts"},
        ),
        (
            {"sharing": {"strategy": "MPS"}, "selector": {"matchLabels": {"gpu.deckhouse.io/device": "l4"}}},
            {"gpu-0000-ca-00-0-mps"},
        ),
        (
            {"deviceType": "MIG", "nvidia": {"mig": {"profile": "2g.12gb"}}},
            {"gpu-0000-3b-00-0-mig-5-0", "gpu-0000-3b-00-0-mig-5-2"},
        ),
        (
            {
                "deviceType": "MIG",
                "nvidia": {"mig": {"profile": "1g.6gb"}},
                "requirements": {"minMemory": "6Gi"},
            },
            set(),
        ),
        ({"requirements": {"minMemory": "24Gi"}}, {"gpu-0000-3b-00-0", "gpu-0000-1b-00-0"}),
        ({"requirements": {"minComputeCapability": "8.5"}}, {"gpu-0000-ca-00-0"}),
        ({"requirements": {"minComputeCapability": "8.0"}}, {"gpu-0000-3b-00-0", "gpu-0000-ca-00-0"}),
        ({"requirements": {"minComputeCapability": "9.0"}}, set()),
        (
            {
                "selector": {
                    "matchLabels": {"gpu.deckhouse.io/vendor": "nvidia", "gpu.deckhouse.io/device": "h100"}
                }
            },
            {"gpu-0000-1b-00-0"},
        ),
        ({"vendor": "Amd"}, set()),
    ],
)
def test_the_selector_picks_exactly_the_intended_offers(spec: dict[str, Any], expected: set[str]) -> None:
    assert selected(gpu_class(**spec)) == expected


def test_names_become_the_named_cards_uuids_and_an_unread_card_is_not_listed() -> None:
    named = gpu_class(names=["n1-0-10de-20b7", "n1-1-10de-27b8"])
    assert selected(named, ["GPU-l4"]) == {"gpu-0000-ca-00-0"}
    assert selected(named, []) == set()


def test_the_expression_reads_attributes_by_domain_and_guards_optional_keys() -> None:
    expression = selector_expression(gpu_class(requirements={"minComputeCapability": "8.6"}), ["GPU-x"])
    assert expression.startswith(
        'device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType'
    )
    assert 'has(device.attributes["gpu.deckhouse.io"].ccMajor)' in expression
    uuid = 'device.attributes["gpu.deckhouse.io"].uuid'
    assert f'has({uuid}) && {uuid} in ["GPU-x"]' in expression
    assert "gpu.deckhouse.io/" not in expression.replace('"gpu.deckhouse.io"', "")


def test_an_unguarded_key_would_have_been_an_error() -> None:
    """The guard above matters: the same comparison without has() fails on a card without it."""
    selector = CEL.compile('device.attributes["gpu.deckhouse.io"].ccMajor >= 8')
    bare = build_offers(BARE).offers[-1]
    with pytest.raises(SelectorError, match="ccMajor"):
        CEL.matches(selector, device_input(DRIVER, bare.device))


def test_string_literals_are_quoted_for_cel() -> None:
    assert cel_string('a"b\\c') == '"a\\"b\\\\c"'


def test_extended_resource_name_defaults_to_the_class_name_while_it_fits() -> None:
    assert extended_resource_name(gpu_class("a30-mig-2g.12gb")) == "gpu.deckhouse.io/a30-mig-2g.12gb"
    assert extended_resource_name(gpu_class("x", extendedResourceName="example.com/gpu")) == "example.com/gpu"
    assert default_extended_resource_name("a" * 64) is None


def test_the_device_class_is_owned_and_carries_the_sharing_config_the_plugin_parses() -> None:
    cls = gpu_class("ts", sharing={"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}})
    rendered = device_class(cls, uuids=None, extended_resource="gpu.deckhouse.io/ts")
    assert name_of(rendered) == "ts"
    [owner] = present(meta(rendered).owner_references)
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("GPUClass", "ts", "u-1", True)
    [config] = present(spec_of(rendered).config)
    opaque = present(config.opaque)
    assert opaque.driver == "gpu.deckhouse.io"
    assert opaque.parameters == {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}},
    }
    assert spec_of(rendered).extended_resource_name == "gpu.deckhouse.io/ts"
    # The kubelet plugin's own strict parser accepts it (unknown fields would fail the Prepare).
    assert parse_gpu_config(opaque.parameters).sharing == cls.spec.sharing


def test_the_device_class_carries_the_driver_capabilities_only_when_the_class_names_them() -> None:
    cls = gpu_class("compute", driverCapabilities=["compute", "utility"])
    [config] = present(spec_of(device_class(cls, uuids=None, extended_resource="x.io/c")).config)
    parameters = present(config.opaque).parameters
    assert parameters["driverCapabilities"] == ["compute", "utility"]
    assert parse_gpu_config(parameters).driver_capabilities == cls.spec.driver_capabilities
    [config] = present(spec_of(device_class(gpu_class("all"), uuids=None, extended_resource="x.io/a")).config)
    assert "driverCapabilities" not in present(config.opaque).parameters  # the node's default


def test_a_class_without_uid_cannot_be_an_owner() -> None:
    cls = gpu_class()
    cls.metadata = V1ObjectMeta(name="cls")
    with pytest.raises(ValueError, match="no name or uid"):
        device_class(cls, uuids=None, extended_resource="gpu.deckhouse.io/cls")


def test_the_sample_classes_parse() -> None:
    from pathlib import Path

    import yaml

    sample = Path(__file__).resolve().parents[4] / "config" / "samples" / "gpuclasses.yaml"
    classes = [GPUClass.from_api_dict(doc) for doc in yaml.safe_load_all(sample.read_text()) if doc]
    assert [c.metadata.name for c in classes] == ["a30-mig-2g", "big-gpu", "shared-gpu"]


T4_VGPU = Card(
    physical_gpu="n1-3-10de-1eb8",
    pci_address="0000:d8:00.0",
    product_name="Tesla T4",
    device="tesla-t4",
    memory_mib=15360,
    uuid="GPU-t4",
    vgpu_types=(
        VgpuTypeSpec("nvidia-232", "GRID T4-4Q", 4096, 4),
        VgpuTypeSpec("nvidia-233", "GRID T4-8Q", 8192, 2),
    ),
)


def test_a_vgpu_class_selects_the_vgpu_offers_and_nothing_else() -> None:
    def chosen(gpu_class_: GPUClass) -> set[str]:
        selector = CEL.compile(selector_expression(gpu_class_, None))
        return {
            offer.name
            for card in (A30, L4, T4_VGPU)
            for offer in build_offers(card).offers
            if CEL.matches(selector, device_input(DRIVER, offer.device))
        }

    q4 = {f"gpu-0000-d8-00-0-vgpu-232-{i}" for i in range(4)}
    q8 = {f"gpu-0000-d8-00-0-vgpu-233-{i}" for i in range(2)}
    assert chosen(gpu_class(deviceType="VGPU")) == q4 | q8
    assert chosen(gpu_class(deviceType="VGPU", requirements={"minMemory": "8Gi"})) == q8


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"sharing": {"strategy": "TimeSlicing"}},
        {"sharing": {"strategy": "MPS"}},
        {"deviceType": "MIG", "nvidia": {"mig": {"profile": "1g.6gb"}}},
    ],
    ids=["Exclusive", "TimeSlicing", "MPS", "MIG"],
)
def test_a_container_class_never_selects_a_card_under_the_vgpu_manager(spec: dict[str, Any]) -> None:
    """Such a card runs no CUDA on the host: its whole-card offer (vmOnly) is for VM passthrough,
    and it has no MIG or shared offers to select."""
    selector = CEL.compile(selector_expression(gpu_class(**spec), None))
    t4 = build_offers(T4_VGPU).offers
    assert "gpu-0000-d8-00-0" in {o.name for o in t4}  # the whole card is offered, to VMs
    assert [o.name for o in t4 if CEL.matches(selector, device_input(DRIVER, o.device))] == []


def test_a_physical_class_tests_vm_only_and_other_device_types_do_not() -> None:
    vm_only = '!has(device.attributes["gpu.deckhouse.io"].vmOnly)'
    assert vm_only in selector_expression(gpu_class(), None)
    assert vm_only in selector_expression(gpu_class(sharing={"strategy": "MPS"}), None)
    assert vm_only not in selector_expression(gpu_class(deviceType="VGPU"), None)
