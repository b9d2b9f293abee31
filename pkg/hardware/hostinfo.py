"""What the node agent reports about its host: OS, kernel release, bare metal or not (spec §4.2.2, §7.5).

Three sources, each optional: ``/etc/os-release`` (freedesktop format), ``/proc/sys/kernel/osrelease``
(what ``uname -r`` prints) and the DMI strings under ``/sys/class/dmi/id``. A missing OS or kernel
source leaves its fields ``None`` and the agent then omits them (spec: "if the source is
unavailable, the field is not written").

Bare metal is different: it gates VFIO passthrough (DESIGN §6), and calling a VM bare metal would
let a Pod take a device the VM cannot isolate. So the heuristic fails closed: any hypervisor marker
in ``sys_vendor`` or ``product_name`` means VM, and so does DMI that cannot be read or is blank
(containers without the mount, firmware without SMBIOS, micro-VMs). :func:`read_host_info`
therefore always decides, never answers "unknown", and :attr:`HostInfo.bare_metal_reason` names
the deciding rule, for logs. One exception is deliberate: EC2 bare-metal instances (``*.metal``,
``*.metal-24xl``) say "Amazon EC2" like every EC2 VM but have no hypervisor below them.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

# Matched case-insensitively at the start of a word in sys_vendor or product_name.
_VM_MARKERS = re.compile(
    r"\b(qemu|kvm|vmware|virtualbox|innotek|xen|hvm domu|bochs|bhyve|parallels|openstack"
    r"|amazon ec2|google|standard pc|virtual machine|virtual platform|cloud hypervisor)",
    re.IGNORECASE,
)
_EC2_METAL = re.compile(r"\.metal(-[0-9a-z]+)?$", re.IGNORECASE)


@dataclass(frozen=True)
class HostInfo:
    os_id: str | None  # os-release ID, e.g. "ubuntu"
    os_version: str | None  # os-release VERSION_ID, e.g. "22.04"
    os_name: str | None  # os-release NAME, e.g. "Ubuntu"
    kernel_release: str | None  # e.g. "5.15.0-105-generic"
    # Fail-closed DMI heuristic. read_host_info always decides (True or False); None is left to
    # callers that build a HostInfo without reading one, meaning "not known", which counts as a VM.
    bare_metal: bool | None
    bare_metal_reason: str = ""  # which rule decided, e.g. "DMI names a hypervisor: 'QEMU'"


def read_host_info(*, os_release: Path, kernel_osrelease: Path, dmi_dir: Path) -> HostInfo:
    """Read the three sources; missing files give ``None`` fields, never an exception."""
    release = parse_os_release(_read(os_release) or "")
    bare_metal, reason = classify_dmi(
        sys_vendor=_read(dmi_dir / "sys_vendor"), product_name=_read(dmi_dir / "product_name")
    )
    return HostInfo(
        os_id=release.get("ID"),
        os_version=release.get("VERSION_ID"),
        os_name=release.get("NAME"),
        kernel_release=_read(kernel_osrelease) or None,
        bare_metal=bare_metal,
        bare_metal_reason=reason,
    )


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


def classify_dmi(*, sys_vendor: str | None, product_name: str | None) -> tuple[bool, str]:
    """``(bare_metal, reason)`` from the two DMI strings; ``None`` means the file was unreadable."""
    if sys_vendor is None or product_name is None or not (sys_vendor or product_name):
        return False, "DMI unreadable or empty; counted as a VM (fail closed)"
    if "amazon ec2" in sys_vendor.lower() and _EC2_METAL.search(product_name):
        return True, f"EC2 bare-metal instance: {product_name!r}"
    for text in (sys_vendor, product_name):
        if match := _VM_MARKERS.search(text):
            return False, f"DMI names a hypervisor: {match.group(0)!r} in {text!r}"
    return True, f"no hypervisor marker in DMI: {sys_vendor!r} / {product_name!r}"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError as err:
        logger.debug("host info source unreadable", extra={"path": str(path), "error": str(err)})
        return None
