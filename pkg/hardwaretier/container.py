"""A container that gets a GPU only through CDI: root, bundle, injection and run, in one place.

:func:`cdi_bundle` assembles the bundle step by step — the root of busybox, glibc and the
program (:mod:`.rootfs`), runc's default config with the tier's changes (:mod:`.bundle`), then
the CDI library applying the named devices from the spec folders (:mod:`.cdi_inject`) — and
:func:`run_with_cdi` runs it (:mod:`.runc`). The devices are whatever Prepare answered: the
claim's own and any device of a base spec it names, so the container receives what a runtime
would be told to give it, nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pkg.hardwaretier.bundle import ROOTFS, cgroups_path, container_config, runc_spec, write_config
from pkg.hardwaretier.cdi_inject import inject
from pkg.hardwaretier.rootfs import Rootfs, build_rootfs
from pkg.hardwaretier.runc import ContainerRun, run_container


@dataclass(frozen=True)
class CdiBundle:
    """A bundle ready to run: its folder, the root it holds, its cgroup and the devices applied."""

    path: Path
    container_id: str
    rootfs: Rootfs
    cgroups_path: str
    devices: tuple[str, ...]

    @property
    def config(self) -> Path:
        return self.path / "config.json"


def cdi_bundle(
    *,
    runc: Path,
    cdi_tool: Path,
    bundle: Path,
    container_id: str,
    program: Path,
    args: Sequence[str] = (),
    spec_dirs: Sequence[Path],
    devices: Sequence[str],
    extra_roots: Sequence[Path] = (),
    command: Sequence[str] | None = None,
) -> CdiBundle:
    """Builds the bundle in ``bundle`` (a new folder) for ``program args``, with ``devices``
    applied from ``spec_dirs`` by the CDI library. ``extra_roots`` are copied into the root
    (:func:`.rootfs.build_rootfs`); ``command``, when given, is what the container runs instead of
    the program — a tool the specs mount, found on the container's ``PATH`` — while the program
    still brings the glibc files into the root."""
    base = runc_spec(runc, bundle)
    rootfs = build_rootfs(bundle / ROOTFS, program=program, extra_roots=extra_roots)
    cgroup = cgroups_path(container_id)
    argv = list(command) if command is not None else [rootfs.program, *args]
    config = write_config(bundle, container_config(base, args=argv, cgroups_path=cgroup))
    inject(cdi_tool, spec_dirs=spec_dirs, config=config, devices=devices)
    return CdiBundle(
        path=bundle, container_id=container_id, rootfs=rootfs, cgroups_path=cgroup, devices=tuple(devices)
    )


def run_with_cdi(
    runc: Path, prepared: CdiBundle, *, state_root: Path, timeout: float = 120.0
) -> ContainerRun:
    """Runs the bundle in the foreground; the container is gone when this returns."""
    return run_container(
        runc, bundle=prepared.path, container_id=prepared.container_id, state_root=state_root, timeout=timeout
    )
