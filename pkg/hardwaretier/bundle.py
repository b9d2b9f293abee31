"""The OCI bundle runc runs: ``runc spec``'s defaults, changed only where the tier needs it.

Starting from runc's own default ``config.json`` keeps the container as plain as runc makes one:
its own PID, mount, IPC, UTS and network namespaces (the network one empty: nothing to set up,
no network needed), three harmless capabilities, ``noNewPrivileges``, and a device cgroup that
denies every device. Whatever the program then gets of the GPU — device nodes with their cgroup
rules, the driver's libraries, hooks, environment — comes from the CDI library applying our specs
to this file (:mod:`.cdi_inject`). What :func:`container_config` changes, and why:

* ``root``: the built root (:mod:`.rootfs`), writable, because the CDI hooks of the driver's spec
  write into it (the soname links, the loader cache);
* ``process``: the program as the command, no terminal (the output is read from pipes), only
  ``PATH`` in the environment (runc's ``TERM`` would be noise);
* ``linux.cgroupsPath``: a name the tier chooses, so the container's cgroup is known in advance —
  where a CUDA process seen by NVML is traced back to its container.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

CONFIG: Final = "config.json"
ROOTFS: Final = "rootfs"
PATH_ENV: Final = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class BundleError(RuntimeError):
    """The bundle cannot be made; the message names the bundle."""


def cgroups_path(container_id: str) -> str:
    """The container's cgroup, directly under the root: runc removes it with the container, and
    no parent folder of ours is left in any hierarchy."""
    return f"/gpu-cp-hardware-tier-{container_id}"


def runc_spec(runc: Path, bundle: Path) -> dict[str, Any]:
    """runc's default ``config.json`` for ``bundle`` (written there by ``runc spec``, then read)."""
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / CONFIG).unlink(missing_ok=True)  # runc spec refuses to overwrite one
    result = subprocess.run(
        [str(runc), "spec", "--bundle", str(bundle)], capture_output=True, text=True, check=False, timeout=60
    )
    if result.returncode != 0:
        raise BundleError(f"{runc} spec --bundle {bundle} failed: {result.stderr.strip()}")
    config: dict[str, Any] = json.loads((bundle / CONFIG).read_text())
    return config


def container_config(
    base: Mapping[str, Any], *, args: Sequence[str], cgroups_path: str, hostname: str = "hardware-tier"
) -> dict[str, Any]:
    """``base`` (runc's defaults) with the tier's changes (see the module docs); ``base`` is kept."""
    if not args:
        raise BundleError("a container needs a command")
    config = copy.deepcopy(dict(base))
    config["root"] = {"path": ROOTFS, "readonly": False}
    process = config.setdefault("process", {})
    process["terminal"] = False
    process["args"] = list(args)
    process["env"] = [PATH_ENV]
    process["cwd"] = "/"
    config["hostname"] = hostname
    config.setdefault("linux", {})["cgroupsPath"] = cgroups_path
    return config


def write_config(bundle: Path, config: Mapping[str, Any]) -> Path:
    """Writes the bundle's ``config.json``; returns its path."""
    path = bundle / CONFIG
    path.write_text(json.dumps(config, indent=1) + "\n")
    return path


def read_config(bundle: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((bundle / CONFIG).read_text())
    return config
