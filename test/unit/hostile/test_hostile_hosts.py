"""Family 5: sysfs, pci.ids, os-release and DMI — any content, any kind of file, a clear answer.

A fixture host (``a30-x2``) is copied and one thing in it is replaced by generated content or by
a hostile kind of file: a FIFO (a read would block forever), a link to ``/dev/zero`` (never ends),
a directory, a link loop, a file of megabytes. The scan, the pci.ids parser, the host reader and
``gpu-handler offers`` run in a bounded child (:mod:`bounded`) and must answer: the other cards
are still read, the broken one is named with the reason, numbers are read only in the kernel's
own format, names never fail anything, and bare metal needs positive evidence.
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

from bounded import run_bounded
from hypothesis import given, settings
from hypothesis import strategies as st

from pkg.hardware.hostinfo import Reading, classify, read_os_release
from pkg.hardware.pci import scan_pci
from pkg.hardware.pciids import PciIds
from pkg.inventory.host_info import FileHostInfoReader

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs" / "a30-x2"
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


def _offers(root: Path, *, unlistable: bool = False) -> tuple[int, str, str]:
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
