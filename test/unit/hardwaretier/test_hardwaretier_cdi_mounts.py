"""The files the CDI specs mount for a set of devices: the spec-level edits of each device's spec
and the device's own, and only for the devices named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pkg.hardwaretier.cdi_mounts import CdiSpecError, mounted_paths


def _spec(folder: Path, name: str, kind: str, shared: list[str], devices: dict[str, list[str]]) -> None:
    def mounts(paths: list[str]) -> list[dict[str, str]]:
        return [{"hostPath": f"/host{p}", "containerPath": p} for p in paths]

    spec = {
        "cdiVersion": "0.6.0",
        "kind": kind,
        "containerEdits": {"mounts": mounts(shared)},
        "devices": [{"name": n, "containerEdits": {"mounts": mounts(m)}} for n, m in devices.items()],
    }
    (folder / f"{name}.json").write_text(json.dumps(spec))


def test_a_devices_mounts_are_its_own_and_its_specs_and_no_other_specs(tmp_path: Path) -> None:
    kind = "k8s.gpu.deckhouse.io/driver"
    _spec(tmp_path, "compute", kind, ["/usr/lib/libcuda.so.1"], {"nvidia-compute": []})
    _spec(tmp_path, "graphics", kind, ["/usr/lib/libGLX_nvidia.so.0"], {"nvidia-graphics": []})
    _spec(tmp_path, "claim", "k8s.gpu.deckhouse.io/claim", [], {"c-0": ["/dev/shm/x"], "c-1": ["/other"]})

    assert mounted_paths([tmp_path], [f"{kind}=nvidia-compute", "k8s.gpu.deckhouse.io/claim=c-0"]) == [
        "/dev/shm/x",
        "/usr/lib/libcuda.so.1",
    ]
    assert "/usr/lib/libGLX_nvidia.so.0" in mounted_paths([tmp_path], [f"{kind}=nvidia-graphics"])


def test_a_device_in_no_spec_is_named(tmp_path: Path) -> None:
    with pytest.raises(CdiSpecError, match="CDI device vendor/kind=ghost is in no spec under"):
        mounted_paths([tmp_path], ["vendor/kind=ghost"])
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CdiSpecError, match=r"bad\.json: cannot be read as a CDI spec"):
        mounted_paths([tmp_path], ["vendor/kind=ghost"])
