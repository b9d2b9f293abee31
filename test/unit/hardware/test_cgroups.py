"""A process's cgroup names its container in every layout the kubelet's cgroup drivers and the
runtimes produce, and a process outside any container keeps its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkg.hardware.cgroups import parse_cgroup, read_cgroup

ID = "3f" * 32
UID = "0b7c9a2e-4d1f-4a8e-9c3d-5e6f7a8b9c0d"
SYSTEMD_UID = UID.replace("-", "_")


@pytest.mark.parametrize(
    ("content", "pod_uid"),
    [
        # cgroup v2, systemd driver, containerd
        (
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/cri-containerd-{ID}.scope\n",
            UID,
        ),
        # cgroup v2, systemd driver, CRI-O; a Guaranteed Pod has no QoS level
        (f"0::/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice/crio-{ID}.scope\n", UID),
        # cgroup v2, cgroupfs driver
        (f"0::/kubepods/besteffort/pod{UID}/{ID}\n", UID),
        # cgroup v1, cgroupfs driver, one line per hierarchy
        (
            f"12:pids:/kubepods/burstable/pod{UID}/{ID}\n11:memory:/kubepods/burstable/pod{UID}/{ID}\n1:name=systemd:/\n",
            UID,
        ),
        # cgroup v1 without per-QoS cgroups: the runtime's own parent, no Pod UID
        (f"9:memory:/k8s.io/{ID}\n8:cpu,cpuacct:/k8s.io/{ID}\n0::/\n", None),
        # docker through cri-dockerd
        (f"0::/system.slice/docker-{ID}.scope\n", None),
    ],
)
def test_the_container_id_and_pod_uid_are_read_from_every_layout(content: str, pod_uid: str | None) -> None:
    cgroup = parse_cgroup(content)

    assert cgroup.container_id == ID
    assert cgroup.pod_uid == pod_uid


def test_a_process_outside_a_container_keeps_its_path() -> None:
    cgroup = parse_cgroup("0::/system.slice/nvidia-persistenced.service\n")

    assert cgroup.container_id is None
    assert cgroup.pod_uid is None
    assert cgroup.path == "/system.slice/nvidia-persistenced.service"


def test_a_pods_conmon_style_neighbour_is_not_taken_for_a_container() -> None:
    cgroup = parse_cgroup(f"0::/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice/crio-conmon-{ID}.scope\n")

    assert cgroup.container_id is None
    assert cgroup.pod_uid == UID  # the Pod is still known


def test_a_process_that_is_gone_reads_as_none(tmp_path: Path) -> None:
    assert read_cgroup(tmp_path, 4242) is None


def test_the_file_is_read_from_the_proc_given(tmp_path: Path) -> None:
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "cgroup").write_text(f"0::/kubepods/pod{UID}/{ID}\n")

    cgroup = read_cgroup(tmp_path, 77)

    assert cgroup is not None
    assert cgroup.container_id == ID


def test_this_process_has_a_readable_cgroup() -> None:
    import os

    cgroup = read_cgroup(Path("/proc"), os.getpid())

    assert cgroup is not None
    assert cgroup.path.startswith("/")
