"""What the local control plane tells each Kubernetes release differently, and which binary it runs."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pkg.devcluster.cluster import DRA_FEATURE_GATES, ControlPlane, ControlPlaneConfig
from pkg.devcluster.releases import parse_minor, release, release_of_binary


def fake_apiserver(folder: Path, output: str, *, status: int = 0) -> Path:
    """A ``kube-apiserver`` that only answers ``--version``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kube-apiserver"
    path.write_text(f"#!/bin/sh\necho '{output}'\nexit {status}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_minor_version_is_read_from_the_version_line() -> None:
    assert parse_minor("Kubernetes v1.34.12") == 34
    assert parse_minor("Kubernetes v1.37.1-rc.0\n") == 37
    with pytest.raises(ValueError, match="no Kubernetes version"):
        parse_minor("etcd Version: 3.6.16")


def test_1_34_is_not_given_the_gate_it_lacks_and_serves_the_alpha_taint_rules() -> None:
    r = release(34)
    gates = r.feature_gates(DRA_FEATURE_GATES)
    assert "DRADeviceTaintRules" not in gates
    assert {
        g for g in ("DRAPartitionableDevices", "DRAConsumableCapacity", "DRADeviceTaints") if gates[g]
    } == {
        "DRAPartitionableDevices",
        "DRAConsumableCapacity",
        "DRADeviceTaints",
    }
    assert r.runtime_config == ("resource.k8s.io/v1alpha3=true",)
    assert r.name == "1.34"


def test_later_releases_get_every_gate_and_no_runtime_config() -> None:
    for minor in (35, 37, 40):
        r = release(minor)
        assert r.feature_gates(DRA_FEATURE_GATES) == DRA_FEATURE_GATES
        assert r.runtime_config == ()


def test_a_release_older_than_the_oldest_supported_is_refused() -> None:
    with pytest.raises(ValueError, match=r"1\.33 is older than 1\.34"):
        release(33)


def test_a_binary_that_cannot_say_its_version_is_a_clear_error(tmp_path: Path) -> None:
    broken = fake_apiserver(tmp_path, "segfault", status=2)
    with pytest.raises(RuntimeError, match="--version failed"):
        release_of_binary(broken)


def test_the_control_plane_runs_the_other_releases_components_and_tells_them_its_gates(
    tmp_path: Path,
) -> None:
    pinned, older = tmp_path / "pinned", tmp_path / "older"
    fake_apiserver(pinned, "Kubernetes v1.37.1")
    fake_apiserver(older, "Kubernetes v1.34.12")
    plane = ControlPlane(
        ControlPlaneConfig(bin_dir=pinned, work_dir=tmp_path / "w", control_plane_bin_dir=older)
    )
    assert plane.release.name == "1.34"
    for component in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        assert plane._process(component, []).argv[0] == str(older / component)
    for from_pinned in ("etcd", "kubectl"):
        assert plane._process(from_pinned, []).argv[0] == str(pinned / from_pinned)
    assert "DRADeviceTaintRules" not in plane._gates()
    assert "DRADeviceTaints=true" in plane._gates()

    same = ControlPlane(ControlPlaneConfig(bin_dir=pinned, work_dir=tmp_path / "v"))
    assert same.release.name == "1.37"
    assert "DRADeviceTaintRules=true" in same._gates()
    assert same._process("kube-apiserver", []).argv[0] == str(pinned / "kube-apiserver")
