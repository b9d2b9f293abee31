"""A real node on this machine: a kubelet and its own containerd, over a simulated GPU host.

Start order: the simulated host (sysfs tree, device nodes), containerd (with the locally built
images imported, since nothing can be pulled), then the kubelet, which registers the Node; the
node is ready when the API server reports it Ready.

Stop order matters, because a kubelet cleans up only what it still knows about and a container
shim outlives containerd: the node's Pods are deleted while the kubelet runs (it unmounts their
volumes and tears down their networks); the kubelet stops; whatever containers remain are killed
and deleted through containerd; containerd stops; then the harness removes what only it can —
leftover mounts under the node's folder, the CNI bridge, stray processes started from the node's
folder. :meth:`RealNode.leftovers` lists anything that survived, and the e2e tier checks it is
empty.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from pkg.devcluster import footprint
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.containerd import Containerd, ContainerdPaths, PodNetwork
from pkg.devcluster.gpuhost import SimulatedGpuHost
from pkg.devcluster.images import ImageArchive
from pkg.devcluster.kubelet import Kubelet, KubeletPaths, host_address
from pkg.devcluster.processes import ManagedProcess, wait_until

log = logging.getLogger(__name__)

_MNT_DETACH = 2
PLUGIN_DRIVER = "gpu.deckhouse.io"  # the DRA driver whose kubelet plugin folder can be a tmpfs
PLUGIN_FOLDER_FILLER = ".filler"


@dataclass(frozen=True)
class NodeConfig:
    """What a test or the demo asks of a node."""

    name: str
    gpu_fixture: Path | None = None  # a fixture sysfs tree; None: a node without GPUs
    labels: dict[str, str] = field(default_factory=dict)
    # The kubelet plugin's folder (gpu-handler's checkpoint) on a tmpfs of this many MiB, so a
    # test can fill it (RealNode.fill_plugin_folder); None: a plain folder of the node's disk.
    plugin_folder_mib: int | None = None


class RealNode:
    """One node: :attr:`host`, :attr:`containerd` and :attr:`kubelet` under ``work_dir/<name>``."""

    def __init__(
        self,
        *,
        config: NodeConfig,
        plane: ControlPlane,
        index: int,
        images: ImageArchive,
        work_dir: Path,
    ) -> None:
        self.config = config
        self.name = config.name
        self.base = work_dir / config.name
        self._plane = plane
        self._images = images
        bin_dir = plane.config.bin_dir
        self.host = SimulatedGpuHost(self.base / "host")
        self.cdi_dir = self.base / "cdi"
        self.containerd = Containerd(
            bin_dir=bin_dir,
            paths=ContainerdPaths(self.base / "containerd"),
            cdi_dir=self.cdi_dir,
            network=PodNetwork.for_index(index),
            log_path=self.base / "logs" / "containerd.log",
        )
        assert plane.pki is not None, "start the control plane before its nodes"
        self.kubelet = Kubelet(
            name=config.name,
            bin_dir=bin_dir,
            paths=KubeletPaths(self.base / "kubelet"),
            pki=plane.pki,
            server_url=plane.server_url,
            runtime_endpoint=self.containerd.endpoint,
            node_ip=host_address(),
            labels=config.labels,
            log_path=self.base / "logs" / "kubelet.log",
        )

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self.containerd.process, self.kubelet.process]

    def logs(self) -> dict[str, Path]:
        return {proc.name: proc.log_path for proc in self.processes}

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, *, timeout: float = 90.0) -> None:
        started = time.monotonic()
        try:
            if self.config.gpu_fixture is not None:
                SimulatedGpuHost.create(self.host.base, self.config.gpu_fixture)
            if self.config.plugin_folder_mib is not None:
                self._mount_plugin_folder(self.config.plugin_folder_mib)
            self.containerd.start()
            self.containerd.import_images(self._images.path)
            self.kubelet.start()
            wait_until(
                self._ready,
                timeout=timeout,
                what=f"node {self.name} to be Ready",
                process=self.kubelet.process,
            )
        except BaseException:
            self.stop()
            raise
        log.info("node %s ready in %.1fs", self.name, time.monotonic() - started)

    def stop(self, *, timeout: float = 60.0) -> None:
        """Stops everything of this node; safe to call twice and after a failed start."""
        if self.kubelet.process.running():
            self._delete_pods(timeout=timeout)
        self.kubelet.stop()
        if self.containerd.process.running():
            self.containerd.remove_all_containers()
        self.containerd.stop()
        self._kill_strays()
        self._unmount_all()
        self._delete_bridge()
        footprint.remove_log_links_into(self.base)
        footprint.remove_empty_runtime_dirs()

    def remove_files(self) -> None:
        """Deletes the node's folder (after :meth:`stop`; mounts first, or rmtree would descend them)."""
        self._unmount_all()
        shutil.rmtree(self.base, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """What this node left on the machine after :meth:`stop`, of what can be told apart from
        other nodes' (mounts, processes, its bridge, log links into its folder): empty when it
        stopped cleanly. Host-wide places shared by every node (network namespaces, shim sockets,
        cgroups) are checked once all nodes have stopped, with a :class:`~footprint.Footprint`."""
        found = [f"mount {m}" for m in self._mounts()]
        found += [f"process {pid}: {cmd}" for pid, cmd in self._stray_processes()]
        if Path("/sys/class/net", self.containerd.network.bridge).exists():
            found.append(f"bridge {self.containerd.network.bridge}")
        found += [f"log link {link}" for link in footprint.log_links_into(self.base)]
        return found

    # -- the plugin folder on a tmpfs (NodeConfig.plugin_folder_mib) ----------------------------------

    @property
    def plugin_folder(self) -> Path:
        """The kubelet plugin's folder of gpu-handler (its sockets and checkpoint)."""
        return self.kubelet.paths.plugin_dir(PLUGIN_DRIVER)

    def fill_plugin_folder(self) -> None:
        """Fills the plugin folder's tmpfs to the last byte with a filler file, as a disk runs full:
        creating a file still works, writing one fails with ENOSPC."""
        if self.config.plugin_folder_mib is None:
            raise RuntimeError(
                f"node {self.name}: fill_plugin_folder needs NodeConfig(plugin_folder_mib=...)"
            )
        fd = os.open(self.plugin_folder / PLUGIN_FOLDER_FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            chunk = 1 << 20
            while chunk >= 512:  # smaller and smaller writes take the last pages too
                try:
                    os.write(fd, bytes(chunk))
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    chunk //= 2
        finally:
            os.close(fd)

    def free_plugin_folder(self) -> None:
        """Removes the filler file: the plugin folder has room again."""
        (self.plugin_folder / PLUGIN_FOLDER_FILLER).unlink(missing_ok=True)

    def _mount_plugin_folder(self, mib: int) -> None:
        """Mounts the tmpfs before anything is written there (unmounted by :meth:`stop`, with every
        other mount under the node's folder)."""
        self.plugin_folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={mib}m,mode=0750", "tmpfs", str(self.plugin_folder)],
            check=True,
            capture_output=True,
            timeout=10,
        )

    # -- internals -------------------------------------------------------------------------------

    def _ready(self) -> bool:
        out = self._plane.kubectl("get", "node", self.name, "-o", "json", check=False)
        if not out:
            return False
        node = json.loads(out)
        conditions = node.get("status", {}).get("conditions", [])
        taints = node.get("spec", {}).get("taints") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        # The node lifecycle controller lifts the not-ready taint; until then nothing schedules.
        return ready and not any(t["key"] == "node.kubernetes.io/not-ready" for t in taints)

    def _delete_pods(self, *, timeout: float) -> None:
        selector = f"spec.nodeName={self.name}"
        self._plane.kubectl(
            "delete", "pods", "--all-namespaces", f"--field-selector={selector}", "--wait=false", check=False
        )
        try:
            wait_until(
                lambda: (
                    not self._plane.kubectl(
                        "get",
                        "pods",
                        "--all-namespaces",
                        f"--field-selector={selector}",
                        "-o",
                        "name",
                        check=False,
                    ).strip()
                ),
                timeout=timeout,
                what=f"the Pods of {self.name} to terminate",
            )
        except TimeoutError:
            log.warning("Pods of %s did not terminate in %.0fs; forcing", self.name, timeout)
            self._plane.kubectl(
                "delete", "pods", "--all-namespaces", f"--field-selector={selector}",
                "--force", "--grace-period=0", check=False,
            )  # fmt: skip

    def _stray_processes(self) -> list[tuple[int, str]]:
        """Processes whose command line or environment names the node's folder and are not ours:
        shims, plugins, and daemons our components detached (a simulated MPS daemon names its
        folders only in its environment)."""
        mine = {p.process.pid for p in self.processes if p.process is not None and p.running()}
        marker = str(self.base).encode()
        strays = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in mine or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in cmdline or marker in environ:
                strays.append((int(entry.name), cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]))
        return strays

    def _kill_strays(self) -> None:
        for pid, cmd in self._stray_processes():
            log.warning("killing a leftover process of node %s: %s", self.name, cmd)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _mounts(self) -> list[str]:
        prefix = str(self.base) + "/"
        points = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(prefix):
                points.append(point)
        return points

    def _unmount_all(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        for point in sorted(self._mounts(), key=len, reverse=True):
            if libc.umount2(point.encode(), _MNT_DETACH) != 0:
                log.warning("unmounting %s failed: %s", point, os.strerror(ctypes.get_errno()))

    def _delete_bridge(self) -> None:
        bridge = self.containerd.network.bridge
        if Path("/sys/class/net", bridge).exists():
            subprocess.run(["ip", "link", "delete", bridge], check=False, capture_output=True, timeout=10)
