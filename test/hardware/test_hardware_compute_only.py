"""A compute-only claim (``driverCapabilities: [compute, utility]``) gets no graphics: its
container, with the same loaders in its root as the graphics checks', finds no Vulkan device (or
no ICD at all), its specs mount no ``libGLX_nvidia`` and the loader cannot resolve one — while
CUDA still runs there. Read-only, as the other whole-card steps."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from pkg.hardwaretier.cdi_mounts import mounted_paths
from pkg.hardwaretier.claims import PreparationNode, PreparedClaim, capabilities_config
from pkg.hardwaretier.cuda_build import product_of
from pkg.hardwaretier.nvml_facts import CardFacts
from pkg.hardwaretier.probes import DLOPEN, VULKAN, probe_line
from pkg.hardwaretier.runc import ContainerRun

ProbeInContainer = Callable[..., ContainerRun]  # the conftest's probe_in_container
CudaInContainer = Callable[[PreparedClaim, str], ContainerRun]  # the conftest's cuda_in_container
ReportLine = Callable[[str], None]  # the conftest's report_line
WholeCardClaims = Callable[..., AbstractContextManager[PreparedClaim]]  # the conftest's whole_card_claims


@pytest.fixture(scope="module")
def compute_claim(whole_card_claims: WholeCardClaims) -> Iterator[PreparedClaim]:
    with whole_card_claims("compute-only", capabilities_config(["compute", "utility"])) as claim:
        yield claim


def test_a_compute_only_claims_container_finds_no_vulkan_device(
    compute_claim: PreparedClaim, probe_in_container: ProbeInContainer, report_line: ReportLine
) -> None:
    run = probe_in_container(compute_claim, VULKAN)
    line = probe_line(run.stdout) or ""
    report_line(f"compute-only: {line or run.describe()}")

    no_icd = run.returncode == 1 and line.startswith("VULKAN FAIL vkCreateInstance -9 ")
    no_device = run.returncode == 2 and line == "VULKAN NO DEVICE"
    assert no_icd or no_device, run.describe()


def test_a_compute_only_claim_gets_no_libglx_nvidia(
    compute_claim: PreparedClaim,
    preparation: PreparationNode,
    probe_in_container: ProbeInContainer,
    report_line: ReportLine,
) -> None:
    mounted = [Path(p).name for p in mounted_paths([preparation.cdi_dir], compute_claim.cdi_device_ids)]
    assert any(name.startswith("libcuda.so.") for name in mounted), sorted(mounted)
    assert not [name for name in mounted if name.startswith(("libGLX_nvidia", "libEGL_nvidia", "nvidia_icd"))]

    run = probe_in_container(compute_claim, DLOPEN, "libGLX_nvidia.so.0")
    line = probe_line(run.stdout) or ""
    report_line(f"compute-only: {line or run.describe()}")

    assert run.returncode == 1, run.describe()
    assert line.startswith("NOT LOADED libGLX_nvidia.so.0: "), run.describe()


def test_cuda_still_runs_for_a_compute_only_claim(
    compute_claim: PreparedClaim,
    cuda_in_container: CudaInContainer,
    facts: dict[str, CardFacts],
    card: str,
    report_line: ReportLine,
) -> None:
    run = cuda_in_container(compute_claim, "compute-only")
    report_line(
        f"compute-only: CUDA OK {product_of(run.stdout)}" if product_of(run.stdout) else run.describe()
    )

    assert run.returncode == 0, run.describe()
    assert product_of(run.stdout) == facts[card].name, run.describe()
