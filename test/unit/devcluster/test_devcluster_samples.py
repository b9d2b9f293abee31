"""The samples of the README's walkthrough run in the demo unchanged: images it provides, no pull,
the unsatisfiable one asks for more whole cards than any demo node has, and the sample classes keep
the VM samples on the VM host's cards and the container samples off them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pkg.devcluster.gpuhost import nvidia_cards
from pkg.devcluster.images import BUSYBOX_IMAGE
from pkg.devcluster.samples import (
    ASKED_WHOLE_CARDS,
    DEMO_NODES,
    RUNNABLE,
    SAMPLES_DIR,
    UNSATISFIABLE,
    SamplePod,
)
from pkg.dra.allocator.cel_env import CelEnvironment, device_input
from pkg.dra.model.card import Card, VgpuTypeSpec
from pkg.dra.model.offers import build_offers

SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
DRIVER = "gpu.deckhouse.io"
VM_SAMPLES = ("pod-vfio.yaml", "pod-vgpu.yaml")
CARD = Card(
    physical_gpu="n-0", pci_address="0000:3b:00.0", product_name="Tesla T4", device="t4", memory_mib=15360
)
VM_HOST_CARD = Card(
    physical_gpu="n-1",
    pci_address="0000:d8:00.0",
    product_name="Tesla T4",
    device="t4",
    memory_mib=15360,
    vgpu_types=(VgpuTypeSpec("nvidia-232", "GRID T4-4Q", 4096, 4),),
)


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _pod(path: Path) -> dict[str, Any]:
    [pod] = [d for d in _documents(path) if d["kind"] == "Pod"]
    return pod


@pytest.mark.parametrize("sample", [*RUNNABLE, UNSATISFIABLE], ids=lambda s: s.file)
def test_each_sample_makes_the_pod_it_is_listed_with(sample: SamplePod) -> None:
    assert _pod(sample.path)["metadata"]["name"] == sample.pod


@pytest.mark.parametrize("file", [*(s.file for s in (*RUNNABLE, UNSATISFIABLE)), *VM_SAMPLES])
def test_samples_use_the_image_the_demo_provides_without_pulling(file: str) -> None:
    for container in _pod(SAMPLES_DIR / file)["spec"]["containers"]:
        assert container["image"] == BUSYBOX_IMAGE
        assert container["imagePullPolicy"] == "Never"


def test_runnable_samples_say_what_their_log_proves() -> None:
    assert all(sample.shows for sample in RUNNABLE)
    assert not UNSATISFIABLE.shows


def test_the_unsatisfiable_sample_asks_more_whole_cards_than_any_demo_node_has() -> None:
    [container] = _pod(UNSATISFIABLE.path)["spec"]["containers"]
    assert container["resources"]["limits"] == {"gpu.deckhouse.io/gpu": ASKED_WHOLE_CARDS}
    most = max(len(nvidia_cards(SYSFS / fixture)) for fixture in DEMO_NODES.values())
    assert most < ASKED_WHOLE_CARDS


def test_every_pod_sample_of_a_kind_the_demo_offers_is_in_the_walkthrough() -> None:
    listed = {s.file for s in (*RUNNABLE, UNSATISFIABLE)}
    not_for_the_demo = {"pod-amd-cpx.yaml"}  # no AMD node there
    assert {p.name for p in SAMPLES_DIR.glob("pod-*.yaml")} == listed | not_for_the_demo
    assert set(VM_SAMPLES) <= listed


def _selected_by_resource() -> dict[str, list[str]]:
    """Each sample class's extended resource → the offers of a plain card and of a VM host's card
    its selectors select, evaluated as the scheduler evaluates them."""
    env = CelEnvironment()
    offers = [*build_offers(CARD).offers, *build_offers(VM_HOST_CARD).offers]
    selected = {}
    for cls in _documents(SAMPLES_DIR / "deviceclasses.yaml"):
        resource = cls["spec"].get("extendedResourceName")
        if resource is None:
            continue
        selectors = [env.compile(sel["cel"]["expression"]) for sel in cls["spec"]["selectors"]]
        selected[resource] = [
            o.name
            for o in offers
            if all(env.matches(sel, device_input(DRIVER, o.device)) for sel in selectors)
        ]
    return selected


def test_the_vm_samples_get_only_the_vm_hosts_cards_and_the_container_samples_never_do() -> None:
    selected = _selected_by_resource()
    asked = {
        sample: next(iter(_pod(SAMPLES_DIR / sample)["spec"]["containers"][0]["resources"]["limits"]))
        for sample in VM_SAMPLES
    }
    assert selected[asked["pod-vfio.yaml"]] == ["gpu-0000-d8-00-0"]  # the VM host's whole card
    assert selected[asked["pod-vgpu.yaml"]] == [f"gpu-0000-d8-00-0-vgpu-232-{i}" for i in range(4)]
    # Whole cards for containers (the whole-card and unsatisfiable samples): the plain card only.
    assert selected["gpu.deckhouse.io/gpu"] == ["gpu-0000-3b-00-0"]
