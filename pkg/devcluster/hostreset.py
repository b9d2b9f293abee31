"""What a reboot does to a simulated GPU host: the volatile hardware state goes, the rest stays.

A real reboot loses everything the kernel and the GPU driver hold in memory and keeps what lives on
disk or in the card's persistent settings. On a simulated host (:mod:`pkg.devcluster.gpuhost`) that
means:

* the sysfs tree is the fixture's again (a tree is a boot's picture): cards bound to the drivers
  they boot with (vfio bindings undone), no mediated devices, ``driver_override`` cleared — but
  ``proc/`` (the loaded driver's files, whose version a driver upgrade changed on disk) and
  ``etc/`` (the installed system) are kept;
* device nodes made at run time under the simulated ``/dev`` (MIG capabilities a runtime made,
  vfio groups of new bindings, IMEX channels) are gone; the ones present at boot stay;
* the simulated driver forgets its GPU and compute instances, its processes, its compute mode and
  time slice and a pending reset; a card's MIG mode is kept, as the real driver keeps it across
  reboots;
* the host gets a new boot ID, at ``<root>/proc/sys/kernel/random/boot_id``, where gpu-handler reads
  it through its ``--proc-root`` as it reads the host's ``/proc``.

The simulated driver's state file is the simulated backend's (pkg/backends/simulated/
driver_memory.py); this layer may not import it, so a unit test holds the two to one format.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pkg.devcluster.gpuhost import DRIVER_STATE, EVENTS_LOCK, SimulatedGpuHost

BOOT_ID_FILE = Path("proc", "sys", "kernel", "random", "boot_id")
# Parts of the sysfs root a reboot does not reset (see the module docstring).
KEPT_AT_REBOOT = frozenset({"proc", "etc"})
DRIVER_STATE_FILE = "driver.json"  # in the simulated driver's state folder, beside its lock


def boot_id_path(host: SimulatedGpuHost) -> Path:
    return host.root / BOOT_ID_FILE


def read_boot_id(host: SimulatedGpuHost) -> str:
    return boot_id_path(host).read_text().strip()


def new_boot_id(host: SimulatedGpuHost) -> str:
    """Gives the host a fresh boot ID, as the kernel does at each boot; returns it."""
    boot_id = str(uuid.uuid4())
    path = boot_id_path(host)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(".boot_id.partial")
    partial.write_text(boot_id + "\n")
    partial.replace(path)
    return boot_id


def reset_sysfs(host: SimulatedGpuHost, fixture: Path) -> None:
    """Puts the host's sysfs tree back as the fixture has it, except :data:`KEPT_AT_REBOOT`."""
    for entry in sorted(host.root.iterdir()) if host.root.is_dir() else []:
        if entry.name in KEPT_AT_REBOOT:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for entry in sorted(fixture.iterdir()):
        if entry.name in KEPT_AT_REBOOT:
            continue
        target = host.root / entry.name
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target, symlinks=True)
        else:
            shutil.copy2(entry, target, follow_symlinks=False)


def remove_runtime_devices(host: SimulatedGpuHost, boot_devices: Iterable[Path]) -> list[Path]:
    """Removes the device nodes under the host's ``dev/`` that were not there at boot, and the
    folders they leave empty; returns what it removed."""
    keep = set(boot_devices)
    removed = [node for node in host.device_nodes() if node not in keep]
    for node in removed:
        node.unlink()
    kept_dirs = {parent for node in keep for parent in node.parents}
    for folder in sorted(
        (p for p in host.dev.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
    ):
        if folder not in kept_dirs and not any(folder.iterdir()):
            folder.rmdir()
    return removed


def reset_driver_state(host: SimulatedGpuHost) -> None:
    """Forgets what the simulated driver held in memory (see the module docstring), under the
    lock the simulated backend takes for each change."""
    state_file = host.nvml_state / DRIVER_STATE / DRIVER_STATE_FILE
    with _driver_locked(host):
        try:
            state: dict[str, Any] = json.loads(state_file.read_text())
        except FileNotFoundError:
            return
        cards = state.get("cards", {})
        state["cards"] = {address: {"mig_mode": card.get("mig_mode", 0)} for address, card in cards.items()}
        partial = state_file.with_name(f".{state_file.name}.reboot")
        partial.write_text(json.dumps(state, indent=1))
        os.replace(partial, state_file)


@contextlib.contextmanager
def _driver_locked(host: SimulatedGpuHost) -> Iterator[None]:
    lock = host.nvml_state / DRIVER_STATE / EVENTS_LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def power_cycle(host: SimulatedGpuHost, *, fixture: Path | None, boot_devices: Iterable[Path]) -> str:
    """Everything above, for a host that was made from ``fixture`` (None: a host without GPUs,
    which only gets a new boot ID); returns the new boot ID."""
    if fixture is not None:
        reset_sysfs(host, fixture)
        remove_runtime_devices(host, boot_devices)
        reset_driver_state(host)
    return new_boot_id(host)
