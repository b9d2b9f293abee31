"""Host info read from four paths at once, and the DMI rules alone: what the hardware tests need
from :mod:`pkg.hardware.hostinfo` beyond what the node agent calls (its reader,
:class:`pkg.inventory.host_info.FileHostInfoReader`, reads the same sources through
``host_info_from``)."""

from __future__ import annotations

from pathlib import Path

from pkg.hardware.hostinfo import (
    HostInfo,
    Reading,
    classify,
    host_info_from,
    read_cpu_flags,
    read_dmi,
    read_kernel_release,
    read_os_release,
)


def read_host_info(*, os_release: Path, kernel_osrelease: Path, dmi_dir: Path, cpuinfo: Path) -> HostInfo:
    """Read the four sources (see :mod:`pkg.hardware.hostinfo`); never raises."""
    return host_info_from(
        os_release=read_os_release(os_release),
        kernel=read_kernel_release(kernel_osrelease),
        dmi=read_dmi(dmi_dir),
        cpu_flags=read_cpu_flags(cpuinfo),
    )


def classify_dmi(*, sys_vendor: str | None, product_name: str | None) -> tuple[bool, str]:
    """What the DMI rules decide, with a CPU that shows no hypervisor."""
    dmi: Reading[tuple[str, str]] = Reading()
    if sys_vendor is not None and product_name is not None:
        dmi = Reading(value=(sys_vendor, product_name))
    return classify(dmi=dmi, cpu_flags=Reading(value=frozenset()))
