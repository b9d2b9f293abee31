"""A whole card, prepared by the gpu-handler's real Prepare, runs CUDA in a container that gets
nothing but what the CDI library applies from our specs.

Read-only: the whole-card claim changes nothing on a card out of MIG mode (preparing a card in
MIG mode would switch MIG off, so that case needs ``--allow-card-changes``); its checkpoint, lock
and CDI specs live in the tier's own folder. The program runs on the host first, as the control:
if it fails there, the container run would say nothing about our specs.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from pkg.backends.nvidia.nvml import PynvmlAdapter
from pkg.gpuhandler.preparation.cdi import CdiSpecs, driver_device_id
from pkg.hardwaretier.claims import PreparationNode, PreparedClaim
from pkg.hardwaretier.cuda_build import product_of
from pkg.hardwaretier.nvml_facts import CardFacts
from pkg.hardwaretier.runc import ContainerRun

CudaInContainer = Callable[[PreparedClaim, str], ContainerRun]  # the conftest's cuda_in_container


def test_a_whole_card_claim_writes_a_cdi_spec_the_loader_accepts(
    whole_claim: PreparedClaim, preparation: PreparationNode, cdi_tool: Path
) -> None:
    spec = CdiSpecs(preparation.cdi_dir).path_of(whole_claim.ref.uid)
    assert spec.is_file()
    every_spec = sorted(str(p) for p in preparation.cdi_dir.glob("*.json"))
    result = subprocess.run([str(cdi_tool), *every_spec], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    named = {name for line in result.stdout.splitlines() for name in line.split(": ", 1)[1].split()}
    assert set(whole_claim.cdi_device_ids) <= named, "Prepare answered a CDI device no spec defines"


def test_the_answer_names_the_base_spec_which_holds_the_drivers_user_space(
    whole_claim: PreparedClaim, preparation: PreparationNode
) -> None:
    cdi = CdiSpecs(preparation.cdi_dir)
    assert whole_claim.cdi_device_ids[-1] == driver_device_id("nvidia")
    spec = json.loads(cdi.driver_path("nvidia").read_text())
    mounted = {Path(m["containerPath"]).name for m in spec["containerEdits"]["mounts"]}
    assert any(name.startswith("libcuda.so.") for name in mounted), sorted(mounted)
    assert any(name.startswith("libnvidia-ml.so.") for name in mounted), sorted(mounted)
    assert preparation.driver_files.findings[-1].ready, preparation.driver_files.findings[-1]


def test_the_claim_spec_gives_the_card_its_device_nodes_and_uuid(
    whole_claim: PreparedClaim,
    preparation: PreparationNode,
    nvml: PynvmlAdapter,
    facts: dict[str, CardFacts],
    card: str,
) -> None:
    spec = json.loads(CdiSpecs(preparation.cdi_dir).path_of(whole_claim.ref.uid).read_text())
    [device] = spec["devices"]  # the claim's own spec: the card; the driver is the base spec's
    edits = device["containerEdits"]
    nodes = [node["path"] for node in edits["deviceNodes"]]
    assert nodes[:2] == [f"/dev/nvidia{nvml.minor_number(card)}", "/dev/nvidiactl"]
    assert f"NVIDIA_VISIBLE_DEVICES={facts[card].uuid}" in edits["env"]


def test_the_cuda_program_runs_on_the_host(cuda_program: Path, facts: dict[str, CardFacts]) -> None:
    result = subprocess.run([str(cuda_program)], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, f"the control run failed:\n{result.stdout}\n{result.stderr}"
    assert product_of(result.stdout) in {f.name for f in facts.values()}, result.stdout


def test_cuda_runs_in_a_container_given_only_our_cdi_specs(
    whole_claim: PreparedClaim,
    cuda_in_container: CudaInContainer,
    facts: dict[str, CardFacts],
    card: str,
    report_line: Callable[[str], None],
) -> None:
    run = cuda_in_container(whole_claim, "whole-card")
    report_line(f"CUDA OK {product_of(run.stdout)}" if product_of(run.stdout) else run.describe())

    assert run.returncode == 0, run.describe()
    assert product_of(run.stdout) == facts[card].name, run.describe()
    assert "devices 1\n" in run.stdout, f"the container sees other cards too:\n{run.describe()}"
