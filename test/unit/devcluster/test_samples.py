"""The samples of the README's walkthrough run in the demo unchanged: images it provides, no pull,
and the unsatisfiable one asks for more whole cards than any demo node has."""

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

SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
VM_SAMPLES = ("pod-vfio.yaml", "pod-vgpu.yaml")


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
    not_for_the_demo = {*VM_SAMPLES, "pod-amd-cpx.yaml"}  # no bare metal, vGPU or AMD node there
    assert {p.name for p in SAMPLES_DIR.glob("pod-*.yaml")} == listed | not_for_the_demo
