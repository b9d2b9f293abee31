"""What the CDI specs mount for a set of devices, read from the spec files themselves.

A check that a capability's files are *absent* from a container (a compute-only claim gets no
``libGLX_nvidia``) needs to know what the specs give it, beside what a program in it can load:
a file can be mounted and still not load, or load from elsewhere. The CDI rules are simple
enough to read here: a device ``<kind>=<name>`` gets its own ``containerEdits`` and those of its
spec as a whole; the mounts' ``containerPath`` is where each file lands.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class CdiSpecError(RuntimeError):
    """A device is in no spec of the folders, or a spec cannot be read; the message names it."""


def _edits_mounts(edits: dict[str, Any] | None) -> list[str]:
    return [str(mount["containerPath"]) for mount in (edits or {}).get("mounts") or []]


def mounted_paths(spec_dirs: Sequence[Path], device_ids: Sequence[str]) -> list[str]:
    """The container paths the specs in ``spec_dirs`` mount for ``device_ids``, sorted, each once."""
    devices: dict[str, tuple[Path, dict[str, Any], dict[str, Any]]] = {}
    for folder in spec_dirs:
        for path in sorted(folder.glob("*.json")):  # gpu-handler writes JSON specs only
            try:
                spec = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise CdiSpecError(f"{path}: cannot be read as a CDI spec: {exc}") from None
            for device in spec.get("devices") or []:
                devices[f"{spec['kind']}={device['name']}"] = (path, spec, device)
    mounted: set[str] = set()
    for device_id in device_ids:
        if device_id not in devices:
            raise CdiSpecError(f"CDI device {device_id} is in no spec under {', '.join(map(str, spec_dirs))}")
        _path, spec, device = devices[device_id]
        mounted.update(_edits_mounts(spec.get("containerEdits")))
        mounted.update(_edits_mounts(device.get("containerEdits")))
    return sorted(mounted)
