"""Family 5: sysfs, pci.ids, os-release and DMI — any content, any kind of file, a clear answer.

A fixture host (``a30-x2``) is copied and one thing in it is replaced by generated content or by
a hostile kind of file: a FIFO (a read would block forever), a link to ``/dev/zero`` (never ends),
a directory, a link loop, a file of megabytes. The scan, the pci.ids parser, the host reader and
``gpu-handler offers`` run in a bounded child (:mod:`bounded`) and must answer: the other cards
are still read, the broken one is named with the reason, numbers are read only in the kernel's
own format, names never fail anything, and bare metal needs positive evidence. The lengths the
readers check are the ones the PhysicalGPU CRD enforces, so what a reader passes is what lands.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from testutil.unit.hostile.bounded import run_bounded

from api.gpu.v1alpha1.hardware import MAX_OS_ID, MAX_TEXT
from pkg.hardware import pciids
from pkg.hardware.hostinfo import (
    MAX_KERNEL_RELEASE_LENGTH,
    MAX_OS_ID_LENGTH,
    MAX_OS_NAME_LENGTH,
    Reading,
    classify,
    read_os_release,
)
from pkg.hardware.pci import scan_pci
from pkg.hardware.pciids import PciIds
from pkg.inventory.desired import MAX_PCI_NAME_LENGTH
from pkg.inventory.host_info import FileHostInfoReader

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "test" / "fixtures" / "sysfs" / "a30-x2"
PCI_IDS = REPO / "test" / "fixtures" / "pci.ids"
GOOD, TARGET = "0000:3b:00.0", "0000:d8:00.0"
ATTRIBUTES = ("vendor", "device", "class", "subsystem_vendor", "subsystem_device", "numa_node")
KINDS = ("fifo", "dev-zero", "directory", "loop", "huge", "dangling")


@contextlib.contextmanager
def host_copy() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "host"
        shutil.copytree(FIXTURE, root, symlinks=True)
        yield root


def attribute(root: Path, name: str, address: str = TARGET) -> Path:
    return (root / "bus" / "pci" / "devices" / address).resolve() / name


def make_hostile(path: Path, kind: str) -> None:
    """Replace ``path`` by a hostile kind of file."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "huge":
        path.write_bytes(b"0x10de" + b" " * (9 << 20))  # over every limit, cpuinfo's 8 MiB included
    else:
        path.symlink_to("nowhere")


def _scan(root: Path) -> tuple[list[str], dict[str, str]]:
    result = scan_pci(root)
    return [d.address for d in result.devices], result.unread


_KERNEL_HEX = re.compile(rb"\s*(0x)?[0-9a-fA-F]{1,4}\s*")


@given(st.sampled_from(("vendor", "device")), st.binary(max_size=40))
def test_any_id_file_content_is_read_strictly_or_the_card_is_named_unread(name: str, content: bytes) -> None:
    with host_copy() as root:
        attribute(root, name).write_bytes(content)
        read, unread = run_bounded(_scan, root)
    assert GOOD in read  # one bad card never hides the others
    strict = _KERNEL_HEX.fullmatch(content) is not None and content.isascii()
    assert (TARGET in read) is strict, (content, unread)
    if not strict:
        assert unread[TARGET]


@given(st.sampled_from(["0x10_de", "+0x10de", "0x 10de", "10de0", "0x1_0de", "٣", "0x10de\x00"]))
def test_python_number_syntax_is_not_the_kernels(content: str) -> None:
    with host_copy() as root:
        attribute(root, "vendor").write_text(content + "\n")
        read, unread = run_bounded(_scan, root)
    assert TARGET not in read
    assert TARGET in unread


@settings(max_examples=len(ATTRIBUTES) * len(KINDS))
@given(st.sampled_from(ATTRIBUTES), st.sampled_from(KINDS))
def test_a_hostile_file_in_place_of_an_attribute_never_hangs_or_exhausts_the_scan(
    name: str, kind: str
) -> None:
    with host_copy() as root:
        make_hostile(attribute(root, name), kind)
        read, unread = run_bounded(_scan, root)
    assert GOOD in read
    optional_and_absent = name in ("numa_node", "subsystem_vendor", "subsystem_device") and kind == "dangling"
    assert (TARGET in read) is optional_and_absent, unread
    if not optional_and_absent:
        assert unread[TARGET]


def _lookups(text: str) -> tuple[str | None, str | None, str | None]:
    db = PciIds.parse(text)
    return db.vendor_name("10de"), db.device_name("10de", "20b7"), db.class_name("0302")


_PCI_IDS_LINE = st.text(alphabet="\t C0123456789abcdefxyz#[]", max_size=30)


@given(st.lists(_PCI_IDS_LINE, max_size=40))
def test_pci_ids_of_any_shape_never_fails_anything(lines: list[str]) -> None:
    text = "\n".join(
        ["10de  NVIDIA Corporation", *lines, "10de  NVIDIA Corporation", "\t20b7  GA100GL [A30 PCIe]"]
    )
    vendor, device, _ = run_bounded(_lookups, text)
    assert vendor == "NVIDIA Corporation"
    assert device == "GA100GL [A30 PCIe]"


@settings(max_examples=len(KINDS))
@given(st.sampled_from(KINDS))
def test_a_hostile_pci_ids_file_reads_as_no_names(kind: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pci.ids"
        make_hostile(path, kind)
        assert run_bounded(lambda: PciIds.load(path).is_empty) is True


def _os_release(content: bytes) -> Reading[dict[str, str]]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "os-release"
        path.write_bytes(content)
        return read_os_release(path)


@given(
    st.one_of(
        st.binary(max_size=200),
        st.builds(lambda v: f"ID={v}\nNAME=X\n".encode(errors="surrogatepass"), st.text(max_size=100)),
        st.integers(0, 200_000).map(lambda n: b"ID=" + b"a" * n + b"\n"),
    )
)
def test_os_release_values_are_checked_before_they_reach_a_status(content: bytes) -> None:
    reading = run_bounded(_os_release, content)
    if reading.value is not None:
        identifier = reading.value.get("ID")
        assert identifier is None or (
            len(identifier) <= 63 and re.fullmatch(r"[A-Za-z0-9._~+-]+", identifier)
        )
        name = reading.value.get("NAME")
        assert name is None or (len(name) <= 256 and name.isprintable())
    else:
        assert reading.failure or not content.strip()


def test_an_os_release_link_loop_is_a_failed_read_never_the_containers_own_file() -> None:
    with host_copy() as root:
        (root / "etc" / "os-release").unlink()
        (root / "usr" / "lib").mkdir(parents=True)
        (root / "etc" / "os-release").symlink_to("../usr/lib/os-release")
        (root / "usr" / "lib" / "os-release").symlink_to("/etc/os-release")  # absolute: back to the start
        info = run_bounded(lambda: FileHostInfoReader(host_root=root, sysfs_root=root).read())
    assert info.os_id is None
    assert "os-release" in info.failed_sources()


_DMI = st.one_of(
    st.sampled_from(
        ["Nutanix", "AHV", "Alibaba Cloud", "Alibaba Cloud ECS", "QEMU", "Supermicro", "Dell Inc."]
    ),
    st.text(max_size=30),
)
_FLAGS = st.one_of(st.none(), st.frozensets(st.sampled_from(["fpu", "vmx", "sse2", "hypervisor", "lm"])))


@given(_DMI, _DMI, _FLAGS)
def test_bare_metal_only_on_positive_evidence(
    vendor: str, product: str, flags: frozenset[str] | None
) -> None:
    bare_metal, reason = classify(dmi=Reading(value=(vendor, product)), cpu_flags=Reading(value=flags))
    if bare_metal:
        assert flags is not None
        assert "hypervisor" not in flags  # whatever DMI says: Nutanix AHV and Alibaba ECS included
        assert vendor or product
    assert reason


@given(st.sampled_from(["fifo", "dev-zero", "directory", "loop", "huge"]))
def test_unreadable_dmi_or_cpu_flags_count_as_a_vm(kind: str) -> None:
    with host_copy() as root:
        make_hostile(root / "proc" / "cpuinfo", kind)
        info = run_bounded(lambda: FileHostInfoReader(host_root=root, sysfs_root=root).read())
    assert info.bare_metal is False
    if kind != "dev-zero":  # resolved inside the host root, where no dev/zero exists: absent
        assert "cpu" in info.failed_sources()


def _offers(root: Path, *, unlistable: bool = False, pci_ids: Path | None = None) -> tuple[int, str, str]:
    import contextlib as ctx
    import sys

    from pkg.app.gpu_handler import main

    if unlistable:

        def refuse(path: object) -> object:
            raise PermissionError(13, "Permission denied", str(path))

        os.scandir = refuse  # type: ignore[assignment]  # only in the bounded child
    out, err = io.StringIO(), io.StringIO()
    with ctx.redirect_stdout(out), ctx.redirect_stderr(err):
        sys.stderr = err
        code = main(
            [
                "offers",
                "--node-name=w1",
                f"--sysfs-root={root}",
                f"--host-root={root}",
                "--backend=simulated-nvidia",
                *([f"--pci-ids={pci_ids}"] if pci_ids is not None else []),
            ]
        )
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=12)
@given(st.sampled_from(["vendor", "class", "device"]), st.sampled_from(KINDS[:-1]))
def test_offers_names_an_unreadable_card_and_exits_1(name: str, kind: str) -> None:
    with host_copy() as root:
        make_hostile(attribute(root, name), kind)
        code, out, err = run_bounded(_offers, root)
    assert code == 1, err
    assert f"# Failed: discover: PCI device {TARGET}: not read: " in out
    assert "problem(s)" in err


def test_offers_with_a_devices_folder_it_cannot_list_is_bad_input() -> None:
    with host_copy() as root:
        code, _, err = run_bounded(_offers, root, unlistable=True)
    assert code == 2
    assert "cannot list" in err
    assert "Traceback" not in err


_NAMED_PCI_IDS = [
    "# a comment",
    "10de  NVIDIA Corporation",
    "\t20b7  GA100GL [A30 PCIe]",
    "\t\t10de 1532  GA100GL [A30 PCIe]",
    "8086  Intel Corporation",
    "\t1521  I350 Gigabit Network Connection",
    "C 02  Network controller",
    "\t00  Ethernet controller",
    "C 03  Display controller",
    "\t02  3D controller",
]
_NAMES = (
    "NVIDIA Corporation",
    "GA100GL [A30 PCIe]",
    "Intel Corporation",
    "I350 Gigabit Network Connection",
    "Ethernet controller",
    "Display controller",
    "3D controller",
)


def _all_names(path: Path) -> tuple[str | None, ...]:
    db = PciIds.load(path)
    return (
        db.vendor_name("10de"),
        db.device_name("10de", "20b7"),
        db.vendor_name("8086"),
        db.device_name("8086", "1521"),
        db.class_name("0200"),
        db.class_name("03"),
        db.class_name("0302"),
    )


def _names_with_a_line_everywhere(folder: Path, line: str) -> list[tuple[str | None, ...]]:
    path = folder / "pci.ids"
    answers = []
    for position in range(len(_NAMED_PCI_IDS) + 1):
        lines = [*_NAMED_PCI_IDS[:position], line, *_NAMED_PCI_IDS[position:]]
        path.write_text("\n".join(lines) + "\n")
        answers.append(_all_names(path))
    return answers


@pytest.mark.parametrize("line", ["\t", "    ", "", " \t "], ids=["tab", "spaces", "empty", "mixed"])
def test_a_blank_line_anywhere_in_pci_ids_loses_no_name_around_it(line: str, tmp_path: Path) -> None:
    """Edited or damaged copies of pci.ids hold whitespace-only lines; one must neither fail the load
    nor end the vendor or class it stands in, wherever it stands."""
    answers = run_bounded(_names_with_a_line_everywhere, tmp_path, line)
    assert answers == [_NAMES] * (len(_NAMED_PCI_IDS) + 1)


@pytest.mark.parametrize("over", [0, 1], ids=["at-the-limit", "one-byte-over"])
def test_a_pci_ids_file_past_the_size_limit_reads_as_no_names_and_offers_still_answer(
    over: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit is lowered to the fixture file's size (it is looked up at each load, and the bounded
    child is forked after the patch): at it every name is there, one byte past it none is, with a
    warning naming the limit — and names are never a reason for the command to fail."""
    pci_ids = tmp_path / "pci.ids"
    shutil.copyfile(PCI_IDS, pci_ids)
    limit = pci_ids.stat().st_size - over
    monkeypatch.setattr(pciids, "MAX_FILE_BYTES", limit)
    with host_copy() as root:
        code, out, err = run_bounded(_offers, root, pci_ids=pci_ids)
    assert code == 0, err
    assert "vendor:\n      id: 10de\n" in out  # the card is still described
    if over:
        assert "name: NVIDIA Corporation" not in out
        assert "name: GA100GL [A30 PCIe]" not in out
        assert f"larger than {limit} bytes" in err
    else:
        assert "name: NVIDIA Corporation" in out
        assert "name: GA100GL [A30 PCIe]" in out


def test_a_pci_ids_file_one_byte_over_the_real_size_limit_reads_as_no_names(tmp_path: Path) -> None:
    """The real constant, on a sparse file (no 64 MiB written): valid names followed by NUL bytes,
    which would still give those names if the size were not checked."""
    path = tmp_path / "pci.ids"
    shutil.copyfile(PCI_IDS, path)
    os.truncate(path, pciids.MAX_FILE_BYTES + 1)
    assert run_bounded(lambda: PciIds.load(path).is_empty) is True


_PHYSICAL_GPU_CRD = REPO / "config" / "crd" / "gpu.deckhouse.io_physicalgpus.yaml"


@pytest.mark.parametrize(
    ("field", "limits"),
    [
        ("nodeInfo.os.id", (MAX_OS_ID, MAX_OS_ID_LENGTH)),
        ("nodeInfo.os.version", (MAX_OS_ID, MAX_OS_ID_LENGTH)),
        ("nodeInfo.os.name", (MAX_TEXT, MAX_OS_NAME_LENGTH)),
        ("nodeInfo.kernelRelease", (MAX_KERNEL_RELEASE_LENGTH,)),
        ("pciInfo.class.name", (MAX_TEXT, MAX_PCI_NAME_LENGTH)),
        ("pciInfo.vendor.name", (MAX_TEXT, MAX_PCI_NAME_LENGTH)),
        ("pciInfo.device.name", (MAX_TEXT, MAX_PCI_NAME_LENGTH)),
    ],
)
def test_the_crd_bounds_what_the_node_writes_with_the_numbers_its_readers_check(
    field: str, limits: tuple[int, ...]
) -> None:
    """The readers check a host's values against their own constants before writing them; the API
    server checks them against the CRD's maxLength. Were the two to drift apart, a value the reader
    passes would be refused at write time (a status that never lands) or a damaged one let in."""
    crd = yaml.safe_load(_PHYSICAL_GPU_CRD.read_text(encoding="utf-8"))
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    for name in field.split("."):
        schema = schema["properties"][name]
    assert schema["type"] == "string"
    assert list(limits) == [schema["maxLength"]] * len(limits)
