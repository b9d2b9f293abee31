"""One containerd per local node: its own root, state, socket, CNI network and CDI spec folder.

Each real node needs a container runtime of its own, because a kubelet removes every container in
its runtime that it does not know about. Everything containerd writes goes under the node's
folder; the few host-wide things it touches are named after the node so a clean stop can find and
remove them (the CNI bridge) or are checked empty by the tests (network namespaces).

Settings this machine needs, and why (docs/testing.md): ``restrict_oom_score_adj``
because root lacks CAP_SYS_RESOURCE, so runc cannot lower a score; cgroupfs rather than systemd
cgroups; the sandbox image pinned to the locally built one, as nothing can be pulled; NRI off (its
socket path is host-wide). CDI is always on in containerd 2.x; ``cdi_spec_dirs`` names where the
node's gpu-handler writes its specs.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pkg.devcluster.apiroute import SERVICE_RANGE
from pkg.devcluster.images import PAUSE_IMAGE
from pkg.devcluster.processes import ManagedProcess, wait_until

log = logging.getLogger(__name__)

CNI_BIN_DIR = Path("/usr/lib/cni")
RUNC = Path("/usr/sbin/runc")
NAMESPACE = "k8s.io"  # containerd's namespace for CRI (kubelet) containers
NETNS_DIR = "/var/run/netns/"  # where containerd's CRI makes a sandbox's network namespace


@dataclass(frozen=True)
class ContainerdPaths:
    """The folders one containerd instance owns, all under ``base``."""

    base: Path

    @property
    def config(self) -> Path:
        return self.base / "config.toml"

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def socket(self) -> Path:
        return self.base / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.base / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.base / "cni" / "ipam"


@dataclass(frozen=True)
class PodNetwork:
    """The node's CNI bridge. Bridges and their routes are host-wide, so name and subnet derive
    from this process and the node's index: a demo and a test run side by side never collide."""

    bridge: str  # at most 15 characters (IFNAMSIZ)
    subnet: str  # e.g. 10.244.3.0/24
    cluster_range: str = ""  # every node's subnet of this run, e.g. 10.244.0.0/16

    @classmethod
    def for_index(cls, index: int) -> PodNetwork:
        run = os.getpid() % 10000
        prefix = f"10.{100 + run % 100}"
        return cls(
            bridge=f"gpucp{run}n{index}", subnet=f"{prefix}.{index}.0/24", cluster_range=f"{prefix}.0.0/16"
        )


class Containerd:
    """A containerd process configured for one node, and the ``ctr`` calls the harness needs."""

    def __init__(
        self, *, bin_dir: Path, paths: ContainerdPaths, cdi_dir: Path, network: PodNetwork, log_path: Path
    ) -> None:
        self.paths = paths
        self.cdi_dir = cdi_dir
        self.network = network
        self._bin_dir = bin_dir
        self.process = ManagedProcess(
            name=f"containerd[{paths.base.parent.name}]",
            argv=[str(bin_dir / "containerd"), "--config", str(paths.config)],
            log_path=log_path,
            # containerd finds its shim on PATH.
            env={"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"},
        )

    @property
    def endpoint(self) -> str:
        return f"unix://{self.paths.socket}"

    def start(self, *, timeout: float = 60.0) -> None:
        for folder in (self.paths.root, self.paths.state, self.paths.cni_conf_dir, self.paths.cni_ipam_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        self.paths.config.write_text(self._config())
        (self.paths.cni_conf_dir / "10-gpucp.conflist").write_text(self._cni_config())
        self.process.start()
        wait_until(
            lambda: self.ctr("version", check=False).returncode == 0,
            timeout=timeout,
            what=f"{self.process.name} to serve",
            process=self.process,
        )

    def import_images(self, archive: Path) -> None:
        self.ctr("-n", NAMESPACE, "images", "import", str(archive))

    def remove_all_containers(self) -> None:
        """Kills every task and deletes every container of the CRI namespace (a kubelet that was
        stopped cannot do it, and a live shim would outlive containerd)."""
        self.remove_all_tasks()
        for container in self._ids("containers", "list", "-q"):
            self.ctr("-n", NAMESPACE, "containers", "delete", container, check=False)

    def remove_all_tasks(self) -> None:
        """Kills every running container process and deletes its task (its shim exits, its
        rootfs is unmounted); the containers' records stay, as they stay on disk over a reboot."""
        for task in self._ids("tasks", "list", "-q"):
            self.ctr("-n", NAMESPACE, "tasks", "kill", "--signal", "SIGKILL", task, check=False)
        wait_until(lambda: not self._running_tasks(), timeout=10, what="killed tasks to exit")
        for task in self._ids("tasks", "list", "-q"):
            self.ctr("-n", NAMESPACE, "tasks", "delete", "--force", task, check=False)

    def sandbox_netns(self) -> list[Path]:
        """The network namespaces of this containerd's containers (bind mounts under
        ``/var/run/netns``, host-wide): what a reboot frees and a harness must remove by hand."""
        found = set()
        for container in self._ids("containers", "list", "-q"):
            info = self.ctr("-n", NAMESPACE, "containers", "info", container, check=False)
            if info.returncode != 0:
                continue
            try:
                spec = json.loads(info.stdout).get("Spec") or {}
            except ValueError:
                continue
            for namespace in (spec.get("linux") or {}).get("namespaces") or []:
                path = namespace.get("path") or ""
                if namespace.get("type") == "network" and path.startswith(NETNS_DIR):
                    found.add(Path(path))
        return sorted(found)

    def clear_volatile_state(self) -> None:
        """Empties what lives on tmpfs on a real node and is gone after a reboot: containerd's
        state folder (tasks, shims, runc state) and the CNI's address leases."""
        for folder in (self.paths.state, self.paths.cni_ipam_dir):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True, exist_ok=True)

    def stop(self) -> None:
        self.process.stop(grace=10.0)

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self._bin_dir / "ctr"), "--address", str(self.paths.socket), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def _ids(self, *args: str) -> list[str]:
        result = self.ctr("-n", NAMESPACE, *args, check=False)
        return result.stdout.split() if result.returncode == 0 else []

    def _running_tasks(self) -> set[str]:
        lines = self.ctr("-n", NAMESPACE, "tasks", "list", check=False).stdout.splitlines()[1:]
        return {line.split()[0] for line in lines if line.split() and line.split()[-1] == "RUNNING"}

    def _config(self) -> str:
        p = self.paths
        runtime = "plugins.'io.containerd.cri.v1.runtime'"
        return "\n".join(
            [
                "version = 3",
                f"root = {json.dumps(str(p.root))}",
                f"state = {json.dumps(str(p.state))}",
                "[grpc]",
                f"  address = {json.dumps(str(p.socket))}",
                "[ttrpc]",
                f"  address = {json.dumps(str(p.base / 'containerd.ttrpc.sock'))}",
                "[debug]",
                f"  address = {json.dumps(str(p.base / 'containerd.debug.sock'))}",
                "[plugins.'io.containerd.nri.v1.nri']",
                "  disable = true",
                "[plugins.'io.containerd.internal.v1.opt']",
                f"  path = {json.dumps(str(p.base / 'opt'))}",
                f"[{runtime}]",
                f"  cdi_spec_dirs = [{json.dumps(str(self.cdi_dir))}]",
                "  restrict_oom_score_adj = true",
                f"[{runtime}.containerd.runtimes.runc]",
                "  runtime_type = 'io.containerd.runc.v2'",
                f"[{runtime}.containerd.runtimes.runc.options]",
                "  SystemdCgroup = false",
                f"  BinaryName = {json.dumps(str(RUNC))}",
                f"  Root = {json.dumps(str(p.state / 'runc'))}",  # runc's state: not /run/containerd/runc
                f"[{runtime}.cni]",
                f"  bin_dirs = [{json.dumps(str(CNI_BIN_DIR))}]",
                f"  conf_dir = {json.dumps(str(p.cni_conf_dir))}",
                "[plugins.'io.containerd.cri.v1.images']",
                "  snapshotter = 'overlayfs'",
                "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
                f"  sandbox = {json.dumps(PAUSE_IMAGE)}",
                "[plugins.'io.containerd.grpc.v1.cri']",
                "  stream_server_address = '127.0.0.1'",
                "  stream_server_port = '0'",
                "",
            ]
        )

    def _cni_config(self) -> str:
        config = {
            "cniVersion": "1.0.0",
            "name": self.network.bridge,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.network.bridge,
                    "isGateway": True,
                    "ipMasq": False,  # no iptables rules to leave behind
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.network.subnet}]],
                        "dataDir": str(self.paths.cni_ipam_dir),
                        # The Service range through the bridge: the kubernetes Service's address
                        # is reachable where pkg.devcluster.apiroute routes it to the API server.
                        # The other nodes' Pod subnets through the bridge too: this machine routes
                        # between the nodes' bridges, as a cluster's network routes between nodes
                        # (the IMEX daemons of a clique reach each other this way).
                        "routes": [{"dst": SERVICE_RANGE}]
                        + ([{"dst": self.network.cluster_range}] if self.network.cluster_range else []),
                    },
                },
            ],
        }
        return json.dumps(config, indent=2)
