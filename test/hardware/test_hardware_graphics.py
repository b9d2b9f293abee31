"""A whole card with every capability the H200-class node has (compute, utility, graphics, video),
prepared by the real Prepare: Vulkan, EGL, nvidia-smi, NVENC, NVDEC and OpenCL each work in a runc
container given nothing of the driver's but what our CDI specs give it.

The container's root holds busybox, glibc, one probe and the loaders an image would bring —
Debian's ``libvulkan1``, ``libegl1``/``libglvnd0``, ``ocl-icd-libopencl1`` and the X11 client
libraries ``libGLX_nvidia`` links (``test/hardware/graphics/loader-packages.txt``) — and no file
of the driver's (the root's guard refuses one). So the ICD and vendor files that lead each loader
to NVIDIA's libraries, those libraries, ``nvidia-smi`` and the device nodes all come from the
specs. ``display`` is not asked for: it is the X server's part, which a headless node lacks.

Read-only, as the CUDA step: the claim changes nothing on a card out of MIG mode. Each test
prints its probe's one line (and the run's summary repeats them), to be quoted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from pkg.hardwaretier.claims import PreparedClaim, capabilities_config
from pkg.hardwaretier.nvml_facts import CardFacts
from pkg.hardwaretier.probes import EGL, NVDEC, NVENC, OPENCL, VULKAN, probe_line
from pkg.hardwaretier.runc import ContainerRun

ProbeInContainer = Callable[..., ContainerRun]  # the conftest's probe_in_container
ReportLine = Callable[[str], None]  # the conftest's report_line
WholeCardClaims = Callable[..., AbstractContextManager[PreparedClaim]]  # the conftest's whole_card_claims
CAPABILITIES = ["compute", "utility", "graphics", "video"]


@pytest.fixture(scope="module")
def graphics_claim(whole_card_claims: WholeCardClaims) -> Iterator[PreparedClaim]:
    """The first card's exclusive offer with every capability but display, prepared once."""
    with whole_card_claims("graphics", capabilities_config(CAPABILITIES)) as claim:
        yield claim


def _line(run: ContainerRun, report_line: ReportLine) -> str:
    """The probe's line, reported; the whole run when the probe printed none (it crashed)."""
    line = probe_line(run.stdout)
    report_line(line if line is not None else f"(no line) {run.describe()}")
    return line or ""


def test_vulkan_enumerates_the_card(
    graphics_claim: PreparedClaim,
    probe_in_container: ProbeInContainer,
    facts: dict[str, CardFacts],
    card: str,
    report_line: ReportLine,
) -> None:
    run = probe_in_container(graphics_claim, VULKAN)
    line = _line(run, report_line)

    assert run.returncode == 0, run.describe()
    assert re.fullmatch(rf"VULKAN OK {re.escape(facts[card].name)} api \d+\.\d+\.\d+", line), run.describe()


def test_egl_finds_the_card_as_a_device_and_makes_a_headless_context(
    graphics_claim: PreparedClaim,
    probe_in_container: ProbeInContainer,
    facts: dict[str, CardFacts],
    card: str,
    report_line: ReportLine,
) -> None:
    run = probe_in_container(graphics_claim, EGL)
    line = _line(run, report_line)

    assert run.returncode == 0, run.describe()
    assert line.startswith("EGL OK NVIDIA "), run.describe()
    assert facts[card].name in line.split(" renderer ", 1)[-1], f"the renderer is not the card: {line}"


def test_nvidia_smi_runs_and_lists_the_claimed_card_alone(
    graphics_claim: PreparedClaim,
    probe_in_container: ProbeInContainer,
    facts: dict[str, CardFacts],
    card: str,
    report_line: ReportLine,
) -> None:
    # the probe only brings glibc into the root: the container runs the nvidia-smi the specs mount
    run = probe_in_container(graphics_claim, NVDEC, command=["nvidia-smi", "-L"])
    listed = [line for line in run.stdout.splitlines() if line.startswith("GPU ")]
    report_line(f"NVIDIA-SMI {listed[0]}" if listed else f"(no line) {run.describe()}")

    assert run.returncode == 0, run.describe()
    assert listed == [f"GPU 0: {facts[card].name} (UUID: {facts[card].uuid})"], run.describe()


def test_nvenc_reports_its_supported_api_version(
    graphics_claim: PreparedClaim, probe_in_container: ProbeInContainer, report_line: ReportLine
) -> None:
    run = probe_in_container(graphics_claim, NVENC)
    line = _line(run, report_line)

    assert run.returncode == 0, run.describe()
    assert re.fullmatch(r"NVENC OK api \d+\.\d+", line), run.describe()


def test_nvdec_loads(
    graphics_claim: PreparedClaim, probe_in_container: ProbeInContainer, report_line: ReportLine
) -> None:
    run = probe_in_container(graphics_claim, NVDEC)
    line = _line(run, report_line)

    assert run.returncode == 0, run.describe()
    assert line == "NVDEC OK", run.describe()


def test_opencl_lists_nvidias_platform_and_the_card(
    graphics_claim: PreparedClaim,
    probe_in_container: ProbeInContainer,
    facts: dict[str, CardFacts],
    card: str,
    report_line: ReportLine,
) -> None:
    run = probe_in_container(graphics_claim, OPENCL)
    line = _line(run, report_line)

    assert run.returncode == 0, run.describe()
    assert line.startswith('OPENCL OK platform "NVIDIA'), run.describe()
    assert line.endswith(f'device "{facts[card].name}"'), run.describe()
