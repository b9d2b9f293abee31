"""The hardware tier: a real NVIDIA GPU node, as root, with no network and no cluster.

Run it with ``make test-hardware`` or ``python -m pytest test/hardware`` from the virtualenv or an
interpreter with the project's wheel installed (docs/testing.md, "The hardware tier"). Nothing
here builds a tool: ``cdi-validate`` and ``nvidia-cdi-hook`` come from ``$GPU_CP_BIN_DIR`` or
``PATH``, runc from ``$GPU_CP_RUNC`` or ``PATH``, the CUDA program from ``nvcc`` on the node or
``$GPU_CP_CUDA_PROGRAM``, the graphics probes from gcc or ``$GPU_CP_PROBE_PROGRAMS``, the
loaders' Debian packages from ``$GPU_CP_LOADER_DEBS`` (or the cache, fetched when there is a
network). Prepare reads the driver's user space under ``$DRIVER_ROOT`` (default
``/``, as gpu-handler's ``--driver-root``) into the base CDI spec, whose hooks run the installed
``nvidia-cdi-hook``.

Read-only by default: NVML is read, ``gpu-handler offers`` computes, a whole-card claim is
prepared into a folder of the tier's own (its checkpoint, lock and CDI specs never touch the
kubelet's), and CUDA programs run. Steps that change the card's settings — MIG mode and MIG
devices, MPS (compute mode and a daemon), the time slice — run only with ``--allow-card-changes``
(or ``GPU_CP_ALLOW_CARD_CHANGES=1``); without it they are skipped, saying so.

The first fixture checks that there is a GPU at all: without one the run stops with
``no NVIDIA GPU (no /dev/nvidiactl / NVML cannot load)`` and exit code 69, and without root with
exit code 77 (:mod:`pkg.hardwaretier.presence`), unless other tiers' tests were selected in the
same run, whose tests then run while these are skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from api.gpu.v1alpha1 import DriverType
from pkg.backends import BackendOptions, VendorBackend, default_registry
from pkg.backends.driver_files import DriverRootOptions
from pkg.backends.nvidia.nvml import PynvmlAdapter
from pkg.backends.nvidia.nvml_port import MIG_ENABLED
from pkg.gpuhandler.preparation.cdi_hook import install_cdi_hook
from pkg.hardwaretier.cdi_inject import find_cdi_tool, find_tool
from pkg.hardwaretier.claims import PreparationNode, PreparedClaim
from pkg.hardwaretier.container import cdi_bundle, run_with_cdi
from pkg.hardwaretier.cuda_build import build_program, find_nvcc, prebuilt_program
from pkg.hardwaretier.loader_packages import (
    DEBS_ENV,
    LoaderPackageError,
    default_debs_dir,
    ensure_debs,
    extract_debs,
    read_pins,
)
from pkg.hardwaretier.nvml_facts import CardFacts, read_facts
from pkg.hardwaretier.offer_checks import OffersOutput, parse_offers
from pkg.hardwaretier.presence import (
    EXIT_NO_GPU,
    EXIT_NOT_ROOT,
    NoGpuError,
    NotRootError,
    check_gpu,
    check_root,
)
from pkg.hardwaretier.probes import (
    PROGRAMS_ENV,
    ProbeBuildError,
    build_probes,
    find_compiler,
    prebuilt_probes,
)
from pkg.hardwaretier.runc import ContainerRun, find_runc

HERE = Path(__file__).resolve().parent
CUDA_SOURCE = HERE / "cuda" / "cuda_ok.cu"
GRAPHICS = HERE / "graphics"
ALLOW_FLAG = "--allow-card-changes"
ALLOW_ENV = "GPU_CP_ALLOW_CARD_CHANGES"
NODE_NAME = os.environ.get("NODE_NAME", "hardware-tier")
DRIVER_ROOT = Path(os.environ.get("DRIVER_ROOT", "/"))
_ONLY_HARDWARE = pytest.StashKey[bool]()
_LINES = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        ALLOW_FLAG,
        action="store_true",
        default=False,
        help=f"run the steps that change the card's settings: MIG, MPS, time slice (or {ALLOW_ENV}=1)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if HERE in item.path.parents]
    for item in ours:
        item.add_marker(pytest.mark.hardware)
    config.stash[_ONLY_HARDWARE] = len(ours) == len(items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The checks' one-line results together at the end of the run, to be quoted as they are."""
    lines = config.stash.get(_LINES, [])
    if lines:
        terminalreporter.section("the checks' lines")
        for line in lines:
            terminalreporter.write_line(line)


ReportLine = Callable[[str], None]


@pytest.fixture
def report_line(request: pytest.FixtureRequest) -> ReportLine:
    """Prints a check's one line and keeps it, with the test's name, for the run's summary."""
    if _LINES not in request.config.stash:
        request.config.stash[_LINES] = []
    lines = request.config.stash[_LINES]

    def report(line: str) -> None:
        print(line)
        lines.append(f"{request.node.name}: {line}")

    return report


@pytest.fixture(scope="session", autouse=True)
def gpu_present(request: pytest.FixtureRequest) -> int:
    """The number of cards NVML sees; stops the run (or skips this tier) without a GPU or root."""
    only_hardware = request.config.stash.get(_ONLY_HARDWARE, True)
    try:
        count = check_gpu()
        check_root()
    except (NoGpuError, NotRootError) as exc:
        if not only_hardware:
            pytest.skip(str(exc))
        pytest.exit(str(exc), returncode=EXIT_NO_GPU if isinstance(exc, NoGpuError) else EXIT_NOT_ROOT)
    return count


@pytest.fixture(scope="session")
def card_changes_allowed(request: pytest.FixtureRequest) -> bool:
    flag = bool(request.config.getoption(ALLOW_FLAG, default=False))  # unregistered when not run alone
    return flag or os.environ.get(ALLOW_ENV, "").lower() in {"1", "true", "yes"}


@pytest.fixture
def card_changes(card_changes_allowed: bool) -> None:
    """Skips a step that changes the card's settings unless the run allows it."""
    if not card_changes_allowed:
        pytest.skip(f"changes the card's settings: run with {ALLOW_FLAG} (or {ALLOW_ENV}=1) to include it")


@pytest.fixture(scope="session")
def nvml() -> Iterator[PynvmlAdapter]:
    adapter = PynvmlAdapter()
    yield adapter
    adapter.close()


@pytest.fixture(scope="session")
def offers_run() -> subprocess.CompletedProcess[str]:
    """``gpu-handler offers`` for this node, by the interpreter running the tier."""
    argv = [sys.executable, "-m", "pkg.app.gpu_handler", "offers", "--node-name", NODE_NAME]
    argv += ["--sysfs-root", "/sys", "--backend", "nvidia"]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="session")
def offers(offers_run: subprocess.CompletedProcess[str]) -> OffersOutput:
    if offers_run.returncode != 0:
        pytest.fail(f"gpu-handler offers exited {offers_run.returncode}:\n{offers_run.stderr}", pytrace=False)
    return parse_offers(offers_run.stdout)


@pytest.fixture(scope="session")
def cards(offers: OffersOutput) -> list[str]:
    """PCI addresses of the cards bound to the nvidia driver, as gpu-handler offers found them."""
    found = sorted(
        g.status.pci_info.address
        for g in offers.gpus
        if g.status
        and g.status.pci_info
        and g.status.current_state
        and g.status.current_state.driver_type is DriverType.NVIDIA
    )
    if not found:
        pytest.fail("gpu-handler offers found no card bound to the nvidia driver", pytrace=False)
    return found


@pytest.fixture(scope="session")
def card(cards: list[str]) -> str:
    """The card the claims are prepared on: the first by PCI address."""
    return cards[0]


@pytest.fixture(scope="session")
def facts(nvml: PynvmlAdapter, cards: list[str]) -> dict[str, CardFacts]:
    return {address: read_facts(nvml, address) for address in cards}


@pytest.fixture(scope="session")
def backend() -> Iterator[VendorBackend]:
    """The NVIDIA backend as gpu-handler builds it, for reading and the card-changing steps."""
    created = default_registry().plugin("nvidia").create(BackendOptions(node_name=NODE_NAME))
    yield created
    created.close()


@pytest.fixture(scope="session")
def cdi_hook(workdir: Path) -> Path:
    """NVIDIA's hook program, installed by content as gpu-handler installs it on a node."""
    try:
        source = find_tool("nvidia-cdi-hook", module="nvidia-cdi-hook")
    except FileNotFoundError as exc:
        pytest.fail(str(exc), pytrace=False)
    return install_cdi_hook(source, workdir / "bin")


@pytest.fixture(scope="session")
def preparing_backend(cdi_hook: Path) -> Iterator[VendorBackend]:
    """The backend Prepare runs over: the driver root and hook program for the base CDI spec."""
    options = BackendOptions(
        node_name=NODE_NAME, driver_root=DriverRootOptions(root=DRIVER_ROOT, cdi_hook=cdi_hook)
    )
    created = default_registry().plugin("nvidia").create(options)
    yield created
    created.close()


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hardware-tier")


@pytest.fixture(scope="session")
def preparation(preparing_backend: VendorBackend, offers: OffersOutput, workdir: Path) -> PreparationNode:
    """The gpu-handler's Prepare and Unprepare on this node, with its files under the work folder."""
    return PreparationNode(
        backend=preparing_backend, node_name=NODE_NAME, workdir=workdir / "node", slices=offers.slices
    )


@pytest.fixture(scope="session")
def cdi_tool() -> Path:
    try:
        return find_cdi_tool()
    except FileNotFoundError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def runc() -> Path:
    try:
        return find_runc()
    except FileNotFoundError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def cuda_program(facts: dict[str, CardFacts], card: str, workdir: Path) -> Path:
    """The CUDA program: ``$GPU_CP_CUDA_PROGRAM``, else built here with nvcc, else the step is skipped."""
    prebuilt = prebuilt_program()
    if prebuilt is not None:
        return prebuilt
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip(
            "no nvcc on this node ($NVCC, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin) and no "
            "$GPU_CP_CUDA_PROGRAM: the CUDA program cannot be built, so its steps are skipped"
        )
    return build_program(
        nvcc,
        source=CUDA_SOURCE,
        output=workdir / "cuda_ok",
        compute_capability=facts[card].compute_capability,
    )


CudaInContainer = Callable[[PreparedClaim, str], ContainerRun]


@pytest.fixture
def cuda_in_container(
    runc: Path, cdi_tool: Path, cuda_program: Path, preparation: PreparationNode, workdir: Path
) -> CudaInContainer:
    """Runs the CUDA program in a runc container given exactly the claim's CDI devices (all the
    IDs its Prepare answered) from the preparation's CDI folder; ``name`` names the bundle."""

    def run(claim: PreparedClaim, name: str) -> ContainerRun:
        container_id = f"{name}-{uuid.uuid4().hex[:8]}"
        bundle = cdi_bundle(
            runc=runc,
            cdi_tool=cdi_tool,
            bundle=workdir / "bundles" / container_id,
            container_id=container_id,
            program=cuda_program,
            spec_dirs=[preparation.cdi_dir],
            devices=claim.cdi_device_ids,
        )
        return run_with_cdi(runc, bundle, state_root=workdir / "runc")

    return run


WholeCardClaims = Callable[..., AbstractContextManager[PreparedClaim]]


@pytest.fixture(scope="module")
def whole_card_claims(
    preparation: PreparationNode,
    offers: OffersOutput,
    facts: dict[str, CardFacts],
    card: str,
    card_changes_allowed: bool,
) -> WholeCardClaims:
    """Prepares a claim for the first card's exclusive offer (``config``: the device's opaque
    config) for as long as the ``with`` block lasts; skips a card in MIG mode unless changes are
    allowed, since a whole-card claim would switch MIG off."""

    @contextmanager
    def claim(name: str, config: Mapping[str, Any] | None = None) -> Iterator[PreparedClaim]:
        if facts[card].mig_mode == MIG_ENABLED and not card_changes_allowed:
            pytest.skip(
                f"card {card} is in MIG mode: a whole-card claim would switch it off (--allow-card-changes)"
            )
        offer = offers.exclusive_offer(card)
        assert offer is not None, f"card {card} has no exclusive offer"
        prepared = preparation.prepare(name, offer, config=config)
        try:
            yield prepared
        finally:
            preparation.unprepare(prepared)

    return claim


@pytest.fixture(scope="module")
def whole_claim(whole_card_claims: WholeCardClaims) -> Iterator[PreparedClaim]:
    """A claim for the first card's exclusive offer, prepared once per module and released after it."""
    with whole_card_claims("whole-card") as claim:
        yield claim


@pytest.fixture(scope="session")
def probes(workdir: Path) -> dict[str, Path]:
    """The graphics probes: ``$GPU_CP_PROBE_PROGRAMS``, else built here with gcc."""
    try:
        prebuilt = prebuilt_probes()
        if prebuilt is not None:
            return prebuilt
        compiler = find_compiler()
        if compiler is None:
            pytest.fail(f"no gcc on this node ($CC, PATH) and no ${PROGRAMS_ENV}", pytrace=False)
        return build_probes(compiler, source_dir=GRAPHICS, output_dir=workdir / "probes")
    except ProbeBuildError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def loaders(workdir: Path) -> Path:
    """The loaders' Debian packages unpacked into one folder, copied into each probe's root."""
    try:
        debs = ensure_debs(default_debs_dir(), read_pins(GRAPHICS / "loader-packages.txt"))
        return extract_debs(debs, workdir / "loaders")
    except LoaderPackageError as exc:
        pytest.fail(f"{exc} (bring them in ${DEBS_ENV}: docs/testing.md, the hardware tier)", pytrace=False)


ProbeInContainer = Callable[..., ContainerRun]


@pytest.fixture
def probe_in_container(
    runc: Path,
    cdi_tool: Path,
    probes: dict[str, Path],
    loaders: Path,
    preparation: PreparationNode,
    workdir: Path,
) -> ProbeInContainer:
    """Runs a probe (``probe_in_container(claim, name, *args, command=None)``) in a runc container
    whose root holds busybox, glibc, the probe and the loaders' packages, given exactly the claim's
    CDI devices; ``command`` runs a tool the specs mount instead of the probe."""

    def run(claim: PreparedClaim, name: str, *args: str, command: list[str] | None = None) -> ContainerRun:
        container_id = f"{name.replace('_', '-')}-{uuid.uuid4().hex[:8]}"
        bundle = cdi_bundle(
            runc=runc,
            cdi_tool=cdi_tool,
            bundle=workdir / "bundles" / container_id,
            container_id=container_id,
            program=probes[name],
            args=args,
            spec_dirs=[preparation.cdi_dir],
            devices=claim.cdi_device_ids,
            extra_roots=[loaders],
            command=command,
        )
        return run_with_cdi(runc, bundle, state_root=workdir / "runc")

    return run
