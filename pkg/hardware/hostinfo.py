"""What the node agent reports about its host: OS, kernel release, bare metal or not.

Four sources, each optional: ``/etc/os-release`` (freedesktop format), ``/proc/sys/kernel/osrelease``
(what ``uname -r`` prints), the DMI strings under ``/sys/class/dmi/id`` and the CPU flags in
``/proc/cpuinfo``. Each is read as a :class:`Reading`: a value, *absent* (the file does not exist:
the field is not written: docs/architecture.md#a-field-without-a-source-is-left-out) or *failed* (it exists
but could not be read, or holds something no such file holds — a NUL byte, a 100 KB ``ID``, a FIFO).
The difference matters to the caller: an absent source is a fact about the host, a failed read is
not, and :mod:`pkg.inventory.host_info` keeps the last known value over a failed read instead of
removing a label because one read failed. Every file is read within bounds
(:mod:`pkg.hardware.files`) and every value is checked against what its source can hold, so
nothing unchecked reaches a status or a label.

Bare metal gates VFIO passthrough (docs/architecture.md#bare-metal-on-positive-evidence), and calling a VM
bare metal would let a Pod take a device the VM cannot isolate. So it is decided from *positive evidence*, and
anything short of it counts as a VM ("unknown counts as VM"): the host is bare metal only when DMI is
readable, names a machine, and names no hypervisor we know, **and** the CPU's flags are readable and lack
``hypervisor`` — the CPUID bit every mainstream hypervisor sets for its guests (KVM and everything
built on it, such as Nutanix AHV or Alibaba Cloud ECS, Xen HVM, VMware, Hyper-V), whatever its DMI
strings say. A hypervisor missing from the DMI list therefore still reads as a VM. The CPU flags
are an x86 notion: a host without them (arm64) counts as a VM. EC2 bare-metal instances
(``*.metal``) say "Amazon EC2" like every EC2 VM, but their CPU has no hypervisor bit, and that is
what makes them bare metal. :attr:`HostInfo.bare_metal_reason` names the deciding rule, for logs.
"""

from __future__ import annotations

import errno
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from pkg.hardware.files import read_text

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# Matched case-insensitively at the start of a word in sys_vendor or product_name.
_VM_MARKERS = re.compile(
    r"\b(qemu|kvm|vmware|virtualbox|innotek|xen|hvm domu|bochs|bhyve|parallels|openstack"
    r"|amazon ec2|google|standard pc|virtual machine|virtual platform|cloud hypervisor|nutanix|ahv"
    r"|alibaba cloud|kubevirt|ovirt|rhev|proxmox|digitalocean|firecracker|acrn|hyper-v)",
    re.IGNORECASE,
)
_EC2_METAL = re.compile(r"\.metal(-[0-9a-z]+)?$", re.IGNORECASE)

OS_RELEASE_LIMIT = 64 * 1024
CPUINFO_LIMIT = 8 * 1024 * 1024  # ~1.5 KB per logical CPU; room for thousands
MAX_OS_ID_LENGTH = 63  # ID and VERSION_ID: os-release(5) identifiers, also label-sized
MAX_OS_NAME_LENGTH = 256
MAX_KERNEL_RELEASE_LENGTH = 64  # __NEW_UTS_LEN: what uname(2) can return
MAX_DMI_LENGTH = 256
_OS_IDENTIFIER = re.compile(r"[A-Za-z0-9._~+-]+", re.ASCII)  # os-release(5): a-z, 0-9, ".", "_", "-"
_KERNEL_RELEASE = re.compile(r"[\x21-\x7e]+", re.ASCII)  # printable ASCII without spaces

# Source names, for HostInfo.failed.
OS_RELEASE, KERNEL, DMI, CPU = "os-release", "kernel", "dmi", "cpu"


@dataclass(frozen=True)
class Reading(Generic[_T]):
    """One source: its value, or why not — ``failure`` is None when the source is simply absent."""

    value: _T | None = None
    failure: str | None = None


@dataclass(frozen=True)
class HostInfo:
    os_id: str | None  # os-release ID, e.g. "ubuntu"
    os_version: str | None  # os-release VERSION_ID, e.g. "22.04"
    os_name: str | None  # os-release NAME, e.g. "Ubuntu"
    kernel_release: str | None  # e.g. "5.15.0-105-generic"
    # Decided from positive evidence: host_info_from always answers True or False; None is left to
    # callers that build a HostInfo without reading one, meaning "not known", which counts as a VM.
    bare_metal: bool | None
    bare_metal_reason: str = ""  # which rule decided, e.g. "the CPU reports a hypervisor"
    # Sources that exist but could not be read, with why; their fields are None (bare metal:
    # False) unless a caller filled them from an earlier reading.
    failed: tuple[tuple[str, str], ...] = ()

    def failed_sources(self) -> frozenset[str]:
        return frozenset(source for source, _ in self.failed)


def host_info_from(
    *,
    os_release: Reading[dict[str, str]],
    kernel: Reading[str],
    dmi: Reading[tuple[str, str]],
    cpu_flags: Reading[frozenset[str]],
) -> HostInfo:
    """The host info of four readings; a failed DMI or CPU reading counts as a VM."""
    release = os_release.value or {}
    failed = [
        (source, reading.failure)
        for source, reading in ((OS_RELEASE, os_release), (KERNEL, kernel), (DMI, dmi), (CPU, cpu_flags))
        if reading.failure is not None
    ]
    bare_metal, reason = classify(dmi=dmi, cpu_flags=cpu_flags)
    return HostInfo(
        os_id=release.get("ID"),
        os_version=release.get("VERSION_ID"),
        os_name=release.get("NAME"),
        kernel_release=kernel.value,
        bare_metal=bare_metal,
        bare_metal_reason=reason,
        failed=tuple(failed),
    )


def classify(*, dmi: Reading[tuple[str, str]], cpu_flags: Reading[frozenset[str]]) -> tuple[bool, str]:
    """``(bare_metal, reason)``: bare metal only on positive evidence from both DMI and the CPU."""
    if dmi.failure is not None:
        return False, f"DMI unreadable ({dmi.failure}); counted as a VM"
    if cpu_flags.failure is not None:
        return False, f"CPU flags unreadable ({cpu_flags.failure}); counted as a VM"
    if dmi.value is None or not any(dmi.value):
        return False, "no DMI strings; counted as a VM"
    sys_vendor, product_name = dmi.value
    ec2_metal = "amazon ec2" in sys_vendor.lower() and _EC2_METAL.search(product_name) is not None
    if not ec2_metal:
        for text in dmi.value:
            if match := _VM_MARKERS.search(text):
                return False, f"DMI names a hypervisor: {match.group(0)!r} in {text!r}"
    if cpu_flags.value is None:
        return False, "no x86 CPU flags to show the absence of a hypervisor; counted as a VM"
    if "hypervisor" in cpu_flags.value:
        return False, f"the CPU reports a hypervisor (DMI: {sys_vendor!r} / {product_name!r})"
    machine = f"{sys_vendor!r} / {product_name!r}"
    if ec2_metal:
        machine = f"the EC2 bare-metal instance {product_name!r}"
    return True, f"no hypervisor: DMI names {machine} and the CPU flags have no 'hypervisor'"


def read_os_release(path: Path) -> Reading[dict[str, str]]:
    """``ID``, ``VERSION_ID`` and ``NAME`` (and the other keys) of an os-release file, checked."""
    text = _read(path, limit=OS_RELEASE_LIMIT, encoding="utf-8")
    if text.value is None:
        return Reading(failure=text.failure)
    values = parse_os_release(text.value)
    for key in ("ID", "VERSION_ID"):
        value = values.get(key)
        if value is not None and (len(value) > MAX_OS_ID_LENGTH or not _OS_IDENTIFIER.fullmatch(value)):
            return Reading(failure=f"{path}: {key} {_shown(value)} is not an os-release identifier")
    name = values.get("NAME")
    if name is not None and (len(name) > MAX_OS_NAME_LENGTH or not name.isprintable()):
        return Reading(failure=f"{path}: NAME {_shown(name)} is not a printable name of at most 256")
    return Reading(value=values)


def read_kernel_release(path: Path) -> Reading[str]:
    text = _read(path, limit=4096, encoding="ascii")
    if text.value is None:
        return Reading(failure=text.failure)
    release = text.value.strip()
    if not release:
        return Reading()
    if len(release) > MAX_KERNEL_RELEASE_LENGTH or not _KERNEL_RELEASE.fullmatch(release):
        return Reading(failure=f"{path}: {_shown(release)} is not a kernel release")
    return Reading(value=release)


def read_dmi(dmi_dir: Path) -> Reading[tuple[str, str]]:
    """``(sys_vendor, product_name)``; absent when either file is."""
    strings = []
    for name in ("sys_vendor", "product_name"):
        text = _read(dmi_dir / name, limit=4096, encoding="utf-8")
        if text.failure is not None:
            return Reading(failure=text.failure)
        if text.value is None:
            return Reading()
        value = text.value.strip()
        if len(value) > MAX_DMI_LENGTH or not value.isprintable():
            return Reading(failure=f"{dmi_dir / name}: {_shown(value)} is not a DMI string")
        strings.append(value)
    return Reading(value=(strings[0], strings[1]))


def read_cpu_flags(path: Path) -> Reading[frozenset[str]]:
    """The flags every CPU of ``/proc/cpuinfo`` shares; absent on CPUs without a flags line."""
    text = _read(path, limit=CPUINFO_LIMIT, encoding="utf-8")
    if text.value is None:
        return Reading(failure=text.failure)
    flag_sets = [
        frozenset(value.split())
        for key, sep, value in (line.partition(":") for line in text.value.splitlines())
        if sep and key.strip() == "flags"
    ]
    if not flag_sets:
        return Reading()
    # "hypervisor" on any CPU is enough to be a guest: take the union.
    return Reading(value=frozenset().union(*flag_sets))


def parse_os_release(text: str) -> dict[str, str]:
    """``KEY=value`` lines of an os-release file, with shell-style quoting and escapes undone.

    Comments, blank lines and empty values are skipped; broken quoting is read leniently rather
    than dropped, since a readable-but-odd OS name is better than none.
    """
    values: dict[str, str] = {}
    for raw in text.splitlines():
        key, sep, value = raw.strip().partition("=")
        if sep and key.isidentifier() and (value := _unquote(value)):
            values[key] = value
    return values


def _unquote(value: str) -> str:
    """Undo shell quoting as os-release uses it: '...' is literal; in "..." a backslash escapes
    only $ " \\ and `; outside quotes it escapes any character. An unclosed quote runs to the end."""
    out: list[str] = []
    quote = ""
    chars = iter(value)
    for char in chars:
        if quote == "'" and char == "'":
            quote = ""
        elif quote == "'":
            out.append(char)
        elif char == "\\":
            escaped = next(chars, "")
            out.append(escaped if not quote or escaped in '$"\\`' else char + escaped)
        elif char in "\"'" and quote in ("", char):
            quote = "" if quote else char
        else:
            out.append(char)
    return "".join(out)


_ABSENT = (errno.ENOENT, errno.ENOTDIR)


def _read(path: Path, *, limit: int, encoding: str) -> Reading[str]:
    try:
        return Reading(value=read_text(path, limit=limit, encoding=encoding))
    except OSError as err:
        if err.errno in _ABSENT:
            logger.debug("host info source missing", extra={"path": str(path)})
            return Reading()
        return Reading(failure=f"{path}: {err.strerror or err}")
    except ValueError as err:
        return Reading(failure=str(err))


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 80 else f"{text[:40]!r}... ({len(text)} characters)"
