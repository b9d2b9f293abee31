"""The core names no vendor: what is NVIDIA's or AMD's lives in its backend package.

A vendor is a plug-in (pkg/backends/<vendor>/, docs/backends/amd.md); the rest of ``pkg`` talks to it
through the port (:mod:`pkg.backends.backend`, :mod:`pkg.backends.preparation`). This test reads
every module outside the backend packages and fails when its *code* — identifiers and string
literals, not docstrings or comments — names a vendor or a vendor-only technology (NVML, DCGM,
CUDA, MIG, MPS; amdgpu, ROCm, KFD, Instinct).

The modules that did so before the rule are listed in :data:`KNOWN`, each with the words it may
use and why. The list is kept honest both ways: a module naming a word not listed for it fails,
and so does a listed module that no longer needs a word (shrink the entry).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from testutil.unit.architecture.module_text import docstring_ids

ROOT = Path(__file__).resolve().parents[3]
BACKENDS = ("pkg/backends/nvidia/", "pkg/backends/simulated/", "pkg/backends/amd/")  # simulated: NVIDIA's
VENDOR = re.compile(
    r"nvidia|nvml|dcgm|cuda|(?<![a-z])mig(?![a-z])|(?<![a-z])mps(?![a-z])"
    r"|amdgpu|(?<![a-z])amd(?![a-z])|rocm|(?<![a-z])kfd(?![a-z])|instinct",
    re.IGNORECASE,
)

_DEV = "the local test cluster builds simulated nodes of a vendor: tooling outside the product layers"
_TIER = "the hardware test tier runs on a real NVIDIA card: tooling outside the product layers"
_DEPLOY = (
    "gpu-controller deploys NVIDIA-only pieces (DCGM, validator, MPS) on NVIDIA nodes only, and each "
    "vendor's gpu-handler (gpuHandler.amd: a DaemonSet of its own) on that vendor's nodes"
)
_API = (
    "the API has vendor blocks (capabilities.nvidia/amd, currentState.nvidia/amd, GPUClass nvidia.mig), "
    "each written only beside its vendor's driver type (Nvidia, ROCm)"
)
_PORT = (
    "the port's vocabulary: NVIDIA as the documented example, MIG and MPS methods of CardPreparer, "
    "Enrichment's currentState blocks (nvidia, amd)"
)
_KINDS = "MIG devices and MPS shares are device kinds of the core pipeline, not yet behind the port"
_NAMES = "normalising product names drops the vendor's prefix from the model label"
_DEFAULT = (
    "the default backend (nvidia) and the Node's allow-mig label; the offline writer withdraws "
    "currentState.nvidia/amd as the real one does"
)
_CPU = "the IOMMU kernel parameter of AMD CPUs, not an AMD GPU"
_SRIOV = "the mdev reader recognises NVIDIA's SR-IOV vGPU folder on a virtual function to refuse it by name"

_IMEX = (
    "compute domains are NVIDIA's multi-node NVLink: gpu-controller runs nvidia-imex (its files from "
    "the NVIDIA backend) on the member nodes"
)
KNOWN: dict[str, tuple[str, set[str]]] = {
    "pkg/app/gpu_handler.py": (_DEFAULT, {"mig", "mps", "nvidia"}),
    "pkg/app/kubectlgpu/cli.py": (_KINDS, {"mig"}),
    "pkg/app/kubectlgpu/catalogue.py": (_KINDS, {"mig"}),
    "pkg/app/kubectlgpu/shares.py": (_KINDS, {"mps"}),
    "pkg/backends/backend.py": (_PORT, {"amd", "nvidia"}),
    "pkg/backends/preparation.py": (_PORT, {"mig", "mps"}),
    "pkg/backends/registry.py": (_PORT, {"amdgpu", "nvidia", "rocm"}),
    "pkg/devcluster/driverroot.py": (_DEV, {"cuda", "mps", "nvidia"}),
    "pkg/devcluster/gpucomponents.py": (_DEV, {"mps", "nvidia", "nvml"}),
    "pkg/devcluster/gpuhost.py": (_DEV, {"cuda", "mig", "mps", "nvidia", "nvml"}),
    "pkg/devcluster/gpustack.py": (_DEV, {"dcgm", "nvidia"}),
    "pkg/devcluster/hostreset.py": (_DEV, {"mig", "nvml"}),
    "pkg/devcluster/images.py": (_DEV, {"amd"}),
    "pkg/devcluster/node.py": (_DEV, {"mps"}),
    "pkg/devcluster/projectimage.py": (_DEV, {"nvidia"}),
    "pkg/devcluster/samples.py": (_DEV, {"mig", "mps", "nvidia"}),
    "pkg/dra/model/card.py": (_KINDS, {"mig", "mps", "nvidia"}),
    "pkg/dra/model/fill_order.py": (_KINDS, {"mig"}),
    "pkg/dra/model/offer_order.py": (_KINDS, {"mig", "nvml"}),
    "pkg/dra/model/offers.py": (_KINDS, {"mig", "mps"}),
    "pkg/dra/model/share_size.py": (_KINDS, {"mps"}),
    "pkg/dra/explain/device_words.py": (_KINDS, {"mig"}),
    "pkg/dracontroller/accounting/devices.py": (_KINDS, {"mig"}),
    "pkg/gpucontroller/gpuclass/internal/gpu_uuid.py": (_API, {"nvidia"}),
    "pkg/gpucontroller/gpuclass/render.py": (_API, {"mig", "nvidia"}),
    "pkg/gpucontroller/imexensemble/render.py": (_IMEX, {"nvidia"}),
    "pkg/gpucontroller/names.py": (_DEPLOY, {"amd", "dcgm", "nvidia"}),
    "pkg/gpucontroller/projections.py": (_API, {"nvidia"}),
    "pkg/gpucontroller/nodelabels/reconciler.py": (_DEPLOY, {"nvidia"}),
    "pkg/gpucontroller/orchestrator/render/__init__.py": (_DEPLOY, {"amd", "dcgm"}),
    "pkg/gpucontroller/orchestrator/render/common.py": (_DEPLOY, {"nvidia", "nvml"}),
    "pkg/gpucontroller/orchestrator/render/dcgm.py": (_DEPLOY, {"dcgm", "nvidia"}),
    "pkg/gpucontroller/orchestrator/render/dcgm_exporter.py": (_DEPLOY, {"dcgm", "nvidia"}),
    "pkg/gpucontroller/orchestrator/render/gpu_handler.py": (_DEPLOY, {"amd", "mps", "nvidia", "nvml"}),
    "pkg/gpucontroller/orchestrator/render/validator.py": (_DEPLOY, {"nvidia"}),
    "pkg/gpucontroller/physicalgpu/internal/state.py": (_API, {"nvidia"}),
    "pkg/gpuhandler/enrichment/handler/apply.py": (_API, {"amd", "nvidia", "rocm"}),
    "pkg/gpuhandler/enrichment/handler/compute_domains.py": (_API, {"nvidia"}),
    "pkg/gpuhandler/enrichment/handler/fabric.py": (_API, {"nvidia"}),
    "pkg/gpuhandler/enrichment/owned.py": (_API, {"amd", "nvidia"}),
    "pkg/gpuhandler/enrichment/status_writer.py": (_API, {"amd", "nvidia"}),
    "pkg/gpuhandler/offline.py": (_DEFAULT, {"amd", "mig", "nvidia"}),
    "pkg/gpuhandler/attribution/sampler.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/attribution/status_reports.py": (f"{_KINDS}; {_API}", {"mig", "nvidia"}),
    "pkg/hardware/mdev.py": (_SRIOV, {"nvidia"}),
    "pkg/gpuhandler/preparation/kinds/__init__.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/preparation/kinds/mig.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/preparation/kinds/partition.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/preparation/kinds/share/__init__.py": (_KINDS, {"mps"}),
    "pkg/gpuhandler/preparation/kinds/share/card_sharing.py": (_KINDS, {"mps"}),
    "pkg/gpuhandler/preparation/kinds/whole_card.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/preparation/metrics.py": (_KINDS, {"mps"}),
    "pkg/gpuhandler/preparation/prepare_steps.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/preparation/prepared_devices.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/preparation/release.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/preparation/setup.py": (_KINDS, {"mig", "mps"}),
    "pkg/gpuhandler/preparation/kinds/vm/vfio.py": (_CPU, {"amd"}),
    "pkg/gpuhandler/publishing/__init__.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/publishing/handler/select.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/publishing/selection.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/publishing/watches.py": (_KINDS, {"mig"}),
    "pkg/gpuhandler/setup.py": (_DEFAULT, {"nvidia"}),
    "pkg/hardware/labels.py": (_NAMES, {"amd", "nvidia"}),
    "pkg/hardwaretier/claims.py": (_TIER, {"mps"}),
    "pkg/hardwaretier/cuda_build.py": (_TIER, {"cuda"}),
    "pkg/hardwaretier/loader_packages.py": (_TIER, {"nvidia"}),
    "pkg/hardwaretier/nvml_facts.py": (_TIER, {"cuda", "mig", "nvml"}),
    "pkg/hardwaretier/offer_checks.py": (_TIER, {"mig", "nvidia", "nvml"}),
    "pkg/hardwaretier/presence.py": (_TIER, {"nvidia", "nvml"}),
    "pkg/hardwaretier/rootfs.py": (_TIER, {"cuda", "nvidia"}),
    "pkg/inventory/desired.py": (_API, {"nvidia"}),
}


def vendor_words(path: Path) -> set[str]:
    """The vendor words in ``path``'s identifiers and non-docstring string literals."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = docstring_ids(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        for text in _texts(node, docstrings):
            for part in re.split(r"_|(?<=[a-z])(?=[A-Z])|[^A-Za-z0-9]", text):
                if match := VENDOR.fullmatch(part) or VENDOR.match(part):
                    found.add(match.group(0).lower())
    return found


def _texts(node: ast.AST, docstrings: set[int]) -> list[str]:
    match node:
        case ast.Name(id=name) | ast.Attribute(attr=name) | ast.arg(arg=name):
            return [name]
        case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name) | ast.ClassDef(name=name):
            return [name]
        case ast.alias(name=name, asname=asname):
            return [name, asname or ""]
        case ast.keyword(arg=arg):
            return [arg or ""]
        case ast.Constant(value=str(value)) if id(node) not in docstrings:
            return [value]
    return []


def _core_modules() -> list[str]:
    paths = (p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "pkg").rglob("*.py")))
    return [p for p in paths if not p.startswith(BACKENDS)]


def test_no_core_module_names_a_vendor_beyond_its_known_exception() -> None:
    offenders = {}
    for module in _core_modules():
        extra = vendor_words(ROOT / module) - KNOWN.get(module, ("", set()))[1]
        if extra:
            offenders[module] = sorted(extra)
    assert offenders == {}, "vendor specifics belong in pkg/backends/<vendor>/ or behind the port"


@pytest.mark.parametrize("module", sorted(KNOWN))
def test_every_known_exception_is_still_needed(module: str) -> None:
    path = ROOT / module
    assert path.exists(), f"{module} is gone: drop its entry"
    unused = KNOWN[module][1] - vendor_words(path)
    assert not unused, f"{module} no longer names {sorted(unused)}: shrink its entry"


def test_the_words_are_found_in_code_and_not_in_prose(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Talks to NVIDIA cards."""\n\n# an AMD comment\nMIG_MODE = 1\nname = "amdgpu"\nvalue = "plain"\n'
    )
    assert vendor_words(module) == {"mig", "amdgpu"}
