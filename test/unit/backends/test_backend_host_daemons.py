"""A daemon started on the host (gpu-handler in a Pod, ``--daemons-on-host``) leaves the cgroups of
whoever started it, runs in the host's namespaces with the host's environment, and is stopped the
same way. Real processes: the simulated ``nvidia-cuda-mps-control`` installed as a host tool, started
from a process placed in a cgroup of its own that stands in for gpu-handler's container."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pkg.backends.host_daemons import HOST_PATH, HostUnreachableError, host_anchor
from pkg.backends.nvidia.sharing import PID_FILE, process_alive, wait_for
from pkg.backends.preparation import MpsFolders
from pkg.backends.simulated.mps_daemon import MARKER, SHM_FILE
from pkg.backends.simulated.sharing import host_tool, simulated_mps_control
from pkg.devcluster.gpuhost import install_mps_tool

CARD_UUID = "GPU-5e3c6a7b-0000-4000-8000-000000000001"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _hierarchy() -> Path:
    """A cgroup hierarchy a test may make a child in: cgroup v2's, or v1's pids controller."""
    return CGROUP_ROOT if (CGROUP_ROOT / "cgroup.procs").exists() else CGROUP_ROOT / "pids"


@pytest.fixture
def container_cgroup() -> Iterator[Path]:
    """A fresh child cgroup, standing in for gpu-handler's container."""
    group = _hierarchy() / f"gpucp-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        yield group
    finally:
        group.rmdir()  # fails (EBUSY) if the daemon had stayed in it


@pytest.fixture
def folders(tmp_path: Path) -> MpsFolders:
    folders = MpsFolders(tmp_path / "mps" / "0000:3b:00.0")
    for folder in (folders.pipe, folders.log, folders.shm):
        folder.mkdir(parents=True)
    return folders


def _start_from_a_container(cgroup: Path, state_dir: Path, folders: MpsFolders) -> None:
    """Starts the daemon on the host from a stand-in container: a process in ``cgroup`` and in a
    mount namespace of its own where the host tool's folder is hidden (so the daemon can only have
    been started in the host's), which exits once the daemon runs."""
    start = (
        "import sys; from pathlib import Path; "
        "from pkg.backends.preparation import MpsFolders; "
        "from pkg.backends.simulated.sharing import simulated_mps_control; "
        "simulated_mps_control(state_dir=Path(sys.argv[1]), on_host=True)"
        ".start(uuid=sys.argv[2], folders=MpsFolders(Path(sys.argv[3])))"
    )
    hidden = state_dir / "bin"
    enter = f'echo $$ > {cgroup / "cgroup.procs"} && mount -t tmpfs container {hidden} && exec "$@"'
    container = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", enter, "sh"]
    env = {**os.environ, "GPU_CP_CONTAINER_ONLY": "1"}
    subprocess.run(
        [*container, sys.executable, "-c", start, str(state_dir), CARD_UUID, str(folders.root)],
        check=True,
        env=env,
        timeout=60,
    )


def _cgroups(pid: int) -> dict[str, str]:
    """``/proc/<pid>/cgroup``: the path in each hierarchy, by its controllers."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return {line.split(":", 2)[1]: line.split(":", 2)[2] for line in lines}


def _environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(e.decode().split("=", 1) for e in entries if b"=" in e)


def test_a_daemon_started_on_the_host_leaves_the_starters_cgroups_and_environment(
    tmp_path: Path, container_cgroup: Path, folders: MpsFolders
) -> None:
    state_dir = tmp_path / "nvml"
    install_mps_tool(state_dir)
    control = simulated_mps_control(state_dir=state_dir, on_host=True)

    _start_from_a_container(container_cgroup, state_dir, folders)

    assert control.running(folders=folders)
    pid = int((folders.pipe / PID_FILE).read_text())
    try:
        assert (container_cgroup / "cgroup.procs").read_text() == ""
        assert set(_cgroups(pid).values()) == {"/"}, _cgroups(pid)  # the root of every hierarchy
        # Started in the host's mount namespace (the container's hides the tool), in one of its own
        # whose /dev/shm is the card's folder; the host's other namespaces.
        assert (folders.shm / SHM_FILE).read_text().strip() == CARD_UUID
        assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        for namespace in ("ipc", "net", "uts"):
            assert os.readlink(f"/proc/{pid}/ns/{namespace}") == os.readlink(f"/proc/self/ns/{namespace}")
        env = _environment(pid)
        assert env["PATH"] == HOST_PATH
        assert env["CUDA_VISIBLE_DEVICES"] == CARD_UUID
        assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(folders.pipe)
        assert "GPU_CP_CONTAINER_ONLY" not in env  # nothing of the container's environment
    finally:
        control.quit(folders=folders)

    assert not process_alive(pid, MARKER.encode())
    assert not (folders.pipe / PID_FILE).exists()  # it was asked to quit, not killed
    assert "command: quit" in (folders.log / "control.log").read_text()


def test_a_second_start_while_the_daemon_runs_is_refused_and_leaves_it_alone(
    tmp_path: Path, folders: MpsFolders
) -> None:
    state_dir = tmp_path / "nvml"
    install_mps_tool(state_dir)
    control = simulated_mps_control(state_dir=state_dir, on_host=True, timeout=5)
    control.start(uuid=CARD_UUID, folders=folders)
    pid = int((folders.pipe / PID_FILE).read_text())
    try:
        with pytest.raises(Exception, match="already running"):
            control.start(uuid=CARD_UUID, folders=folders)
        assert control.running(folders=folders)
        assert int((folders.pipe / PID_FILE).read_text()) == pid
    finally:
        control.quit(folders=folders)
    wait_for(lambda: not process_alive(pid, MARKER.encode()), timeout=10, what="the daemon to stop")


def test_on_the_host_the_simulated_daemon_needs_its_host_tool(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="state folder"):
        simulated_mps_control(on_host=True)
    control = simulated_mps_control(state_dir=tmp_path / "no-tool", on_host=True, timeout=5)
    folders = MpsFolders(tmp_path / "mps")
    for folder in (folders.pipe, folders.log, folders.shm):
        folder.mkdir(parents=True)
    with pytest.raises(Exception, match="nvidia-cuda-mps-control"):
        control.start(uuid=CARD_UUID, folders=folders)


def test_the_host_is_the_nearest_ancestor_outside_the_own_mount_namespace(tmp_path: Path) -> None:
    # On the host already: no ancestor below PID 1 in another mount namespace.
    assert host_anchor() is None
    # A stand-in container: a child in a mount namespace of its own finds this process.
    probe = "from pkg.backends.host_daemons import host_anchor; print(host_anchor())"
    result = subprocess.run(
        ["unshare", "--mount", "--", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert int(result.stdout) == os.getpid()


def test_an_unreadable_ancestor_names_the_process_and_what_gpu_handler_needs(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    for pid, parent in ((30, 20), (20, 10)):
        (proc / str(pid) / "ns").mkdir(parents=True)
        (proc / str(pid) / "ns" / "mnt").symlink_to("mnt:[1]")
        (proc / str(pid) / "status").write_text(f"Name:\tx\nPPid:\t{parent}\n")
    (proc / "10").mkdir()
    (proc / "10" / "status").write_text("Name:\tshim\nPPid:\t1\n")  # its ns/mnt cannot be read
    with pytest.raises(HostUnreachableError, match=r"process 10, an ancestor of 30.*host's PID namespace"):
        host_anchor(proc, 30)


def test_a_simulated_host_has_the_tool_where_the_simulated_backend_runs_it(tmp_path: Path) -> None:
    assert install_mps_tool(tmp_path) == host_tool(tmp_path)
    assert MARKER in host_tool(tmp_path).read_text()
