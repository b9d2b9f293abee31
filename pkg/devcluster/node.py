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

from pkg.devcluster import footprint, hostreset
from pkg.devcluster.apilink import ApiLink
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
    # The kubelet and the node's components reach the API server through an ApiLink of their own,
    # so a test can cut this node alone off it (RealNode.api_link); False: straight to it.
    api_link: bool = False


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
        self.api_link = ApiLink(plane.apiserver_port) if config.api_link else None
        self._boot_devices: list[Path] = []
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
            server_url=self.api_link.url if self.api_link is not None else plane.server_url,
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

    @property
    def component_kubeconfig(self) -> Path:
        """The kubeconfig the node's own components (gpu-handler, gpu-node-agent) use: the
        admin one, pointed at the node's :class:`ApiLink` when it has one (written at start)."""
        if self.api_link is None:
            return self._plane.kubeconfig
        return self.base / "kubeconfig-via-link"

    def boot_id(self) -> str:
        """The simulated host's boot ID, which gpu-handler reads through its ``--proc-root``."""
        return hostreset.read_boot_id(self.host)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, *, timeout: float = 90.0) -> None:
        started = time.monotonic()
        try:
            if self.config.gpu_fixture is not None:
                SimulatedGpuHost.create(self.host.base, self.config.gpu_fixture)
                self._boot_devices = self.host.device_nodes()
            hostreset.new_boot_id(self.host)
            if self.api_link is not None:
                self.api_link.start()
                self._write_component_kubeconfig()
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
        if self.api_link is not None:
            self.api_link.stop()
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

    # -- faults: what happens to a real node's daemons and to the machine itself -----------------------

    def restart_kubelet(self, *, crash: bool = True, timeout: float = 90.0) -> None:
        """Restarts the kubelet (kill -9 when ``crash``, else SIGTERM) on the same root folder, and
        waits until it is healthy and the node Ready. Running containers are untouched; the new
        kubelet finds them in containerd and its plugins in their registration folder."""
        self.kubelet.process.kill() if crash else self.kubelet.stop()
        self.kubelet.start()
        self._wait_ready(timeout)

    def restart_containerd(self, *, crash: bool = True, timeout: float = 90.0) -> None:
        """Restarts containerd (kill -9 when ``crash``, else SIGTERM) on the same folders. Its shims
        run in process groups of their own, so running containers survive it as on a real node,
        and the new containerd reconnects to them; the kubelet reconnects to the new one."""
        proc = self.containerd.process
        proc.kill() if crash else self.containerd.stop()
        self.containerd.start()
        self._wait_ready(timeout)

    def reboot(self, *, timeout: float = 120.0) -> None:
        """What a reboot does to this node, as far as one machine shared by several nodes can show
        it; the caller stops the node's own components (gpu-handler, gpu-node-agent) before and
        starts them after.

        Gone: every container process and sandbox (the kubelet and containerd are killed; their
        records on disk stay, so the kubelet recreates the node's Pods' containers in new
        sandboxes), whatever lives on tmpfs on a real node (containerd's state folder, the CNI's
        address leases, the node's ``run/`` folder, the MPS daemons' folders, the CDI specs
        there), every mount under the node's folder but the kubelet plugin folder's disk (its
        tmpfs and the kubelet root's bind that carries it), the sandboxes' network namespaces,
        and the simulated host's volatile hardware state
        (:func:`pkg.devcluster.hostreset.power_cycle`: MIG instances, mdevs, vfio bindings,
        device nodes made at run time; a new boot ID). Then containerd and the kubelet start
        again, and this returns once the node is Ready."""
        netns = self.containerd.sandbox_netns() if self.containerd.process.running() else []
        self.kubelet.process.kill()
        if self.containerd.process.running():
            self.containerd.remove_all_tasks()
        self.containerd.process.kill()
        self._kill_strays()
        self._unmount_all(keep=self._disk_mounts())
        _remove_netns(netns)
        self.containerd.clear_volatile_state()
        for folder in self._volatile_folders():
            shutil.rmtree(folder, ignore_errors=True)
        boot_id = hostreset.power_cycle(
            self.host, fixture=self.config.gpu_fixture, boot_devices=self._boot_devices
        )
        log.info("node %s rebooted (boot ID %s)", self.name, boot_id)
        self.containerd.start()
        self.kubelet.start()
        self._wait_ready(timeout)

    def _volatile_folders(self) -> list[Path]:
        """The node's folders that stand in for tmpfs ones of a real host (``/run``, ``/var/run/cdi``,
        the MPS daemons' folders under ``/run``): gone after a reboot."""
        return [self.base / "run", self.base / "mps", self.cdi_dir]

    def _disk_mounts(self) -> frozenset[str]:
        """Mounts under the node's folder that stand in for its disk and survive a reboot: the
        plugin folder's tmpfs (NodeConfig.plugin_folder_mib) holds what is on disk on a real node,
        and the kubelet root's bind onto itself carries it. Unmounting the root would detach the
        tmpfs with it (a lazy unmount takes the whole subtree): the checkpoint would be lost and
        the plugin would write to the machine's disk after the reboot."""
        if self.config.plugin_folder_mib is None:
            return frozenset()
        return frozenset({str(self.kubelet.paths.root), str(self.plugin_folder)})

    def _wait_ready(self, timeout: float) -> None:
        wait_until(self.kubelet.healthy, timeout=timeout, what=f"the kubelet of {self.name} to be healthy")
        wait_until(
            self._ready, timeout=timeout, what=f"node {self.name} to be Ready", process=self.kubelet.process
        )

    def _write_component_kubeconfig(self) -> None:
        assert self.api_link is not None
        config = json.loads(self._plane.kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.api_link.url
        self.component_kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        self.component_kubeconfig.write_text(json.dumps(config, indent=2))
        self.component_kubeconfig.chmod(0o600)

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
        # Never fill the machine's own disk: the folder must be the node's small tmpfs right now
        # (a reboot or a stop may have unmounted it), and the writes stop at its size.
        limit = self.config.plugin_folder_mib << 20
        stats = os.statvfs(self.plugin_folder)
        if not os.path.ismount(self.plugin_folder) or stats.f_blocks * stats.f_frsize > 2 * limit:
            raise RuntimeError(
                f"node {self.name}: {self.plugin_folder} is not its "
                f"{self.config.plugin_folder_mib} MiB tmpfs; refusing to fill it"
            )
        fd = os.open(self.plugin_folder / PLUGIN_FOLDER_FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            chunk = 1 << 20
            written = 0
            while chunk >= 512 and written <= 2 * limit:  # smaller writes take the last pages too
                try:
                    written += os.write(fd, bytes(chunk))
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
        other mount under the node's folder).

        The kubelet wants its root folder on a shared mount: at start, unless the mount the root
        is on is shared already, it bind-mounts the root onto itself and makes that rshared. Such
        a bind mount would hide a tmpfs mounted below the root before it (and the plugin would
        write to the machine's disk). So the root is bound onto itself and made rshared here
        first, and the kubelet (and every restart of it) finds nothing to do."""
        self.plugin_folder.mkdir(parents=True, exist_ok=True)
        root = str(self.kubelet.paths.root)
        if not os.path.ismount(root):
            subprocess.run(["mount", "--bind", root, root], check=True, capture_output=True, timeout=10)
        subprocess.run(["mount", "--make-rshared", root], check=True, capture_output=True, timeout=10)
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

    def _unmount_all(self, *, keep: frozenset[str] = frozenset()) -> None:
        for point in sorted(self._mounts(), key=len, reverse=True):
            if point not in keep:
                _unmount(point)

    def _delete_bridge(self) -> None:
        bridge = self.containerd.network.bridge
        if Path("/sys/class/net", bridge).exists():
            subprocess.run(["ip", "link", "delete", bridge], check=False, capture_output=True, timeout=10)


def _unmount(point: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(point.encode(), _MNT_DETACH) != 0:
        log.warning("unmounting %s failed: %s", point, os.strerror(ctypes.get_errno()))


def _remove_netns(paths: list[Path]) -> None:
    """Unmounts and deletes network namespaces of sandboxes that died with their containerd (the
    veth pair of each goes with it); on a real host a reboot leaves none to remove."""
    for path in paths:
        if path.exists():
            _unmount(str(path))
            with contextlib.suppress(OSError):
                path.unlink()
