"""Our node components on a real local node: gpu-node-agent and gpu-handler as host processes.

Until the components run from an image in Pods of the chart's DaemonSets, the e2e tier and the
demo start them as processes of this machine, configured exactly as the DaemonSets configure them
for a real host — only the host paths point into the node's simulated GPU host: the sysfs tree,
``/dev`` (device nodes), ``/proc`` (the driver's files), the kubelet's root folder (plugin
sockets), the containerd's CDI folder, and a stand-in driver installation (real shared objects named
as the driver names them, :mod:`pkg.devcluster.driverroot`) whose files the base CDI spec gives
every GPU container, with NVIDIA's CDI hook as built by ``make tools``. The gpu-handler serves the
kubelet as the DRA plugin of ``gpu.deckhouse.io``; :meth:`GpuComponents.restart_handler` restarts
it, optionally with
``GPU_HANDLER_CRASH_AT`` set, for the crash tests.

``DriverReady`` is reported by the GPU validator through gpu-controller on a real cluster, and
``make demo`` runs that flow (:mod:`pkg.devcluster.gpustack`); the e2e tier's kubelet-plugin tests
use :func:`mark_driver_ready`, which plays the validator's part with its own field manager.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.driverroot import DriverRoot, Layout, build_driver_root, upgrade_driver_root
from pkg.devcluster.node import RealNode
from pkg.devcluster.processes import ManagedProcess, free_port, wait_until

VALIDATOR_STAND_IN = "gpu-validator-standin"


class GpuComponents:
    """gpu-node-agent and gpu-handler (simulated NVIDIA backend) for one real node."""

    def __init__(
        self,
        *,
        node: RealNode,
        plane: ControlPlane,
        pci_ids: Path,
        driver_version: str,
        handler_args: Sequence[str] = (),
    ) -> None:
        self.node = node
        self._driver_version = driver_version  # the simulated driver's: its user space must match
        self._plane = plane
        self._pci_ids = pci_ids
        self._handler_args = list(handler_args)
        self._instance = str(uuid.uuid4())
        self._handler_metrics_port = free_port()
        logs = node.base / "logs"
        self.agent = self._process("gpu-node-agent", "pkg.app.gpu_node_agent", self._agent_args(), logs)
        self.handler = self._process("gpu-handler", "pkg.app.gpu_handler", self._handler_argv(), logs)

    @property
    def driver_root(self) -> DriverRoot:
        """The node's stand-in NVIDIA driver (:mod:`pkg.devcluster.driverroot`), of the simulated
        driver's version, in a folder of its own like ``/usr/local/nvidia`` on a real node."""
        return build_driver_root(
            self.node.base / "nvidia-driver", layout=Layout.VENDOR_FOLDER, version=self._driver_version
        )

    @property
    def mps_root(self) -> Path:
        """gpu-handler's ``--mps-root``: the node's MPS daemon folders, one per shared card."""
        return self.node.base / "mps"

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self.agent, self.handler]

    def logs(self) -> dict[str, Path]:
        return {proc.name: proc.log_path for proc in self.processes}

    def start(self) -> None:
        for proc in self.processes:
            proc.start()

    def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()

    def restart_handler(self, *, env: Mapping[str, str] | None = None) -> None:
        """Stops the handler (SIGTERM) and starts it again with ``env`` added to its environment."""
        self.handler.stop()
        self.handler.env = dict(env or {})
        self.handler.start()

    def reload_driver(self, version: str) -> None:
        """A driver upgrade under the running gpu-handler: the driver root's files become
        ``version``'s (:func:`~pkg.devcluster.driverroot.upgrade_driver_root`), then the simulated
        NVML reports ``version``, as the new kernel module does once loaded. gpu-handler notices at
        its next Prepare or periodic round and rewrites the driver's CDI specs."""
        upgrade_driver_root(self.driver_root, layout=Layout.VENDOR_FOLDER, version=version)
        self._driver_version = version
        self.node.host.load_driver(version)

    @property
    def driver_version(self) -> str:
        """The version of the node's driver now (changed by :meth:`reload_driver`)."""
        return self._driver_version

    def wait_registered(self, *, since: int = 0, timeout: float = 60.0) -> None:
        """Until the kubelet has registered the handler's plugin (after byte ``since`` of its log)."""
        wait_until(
            lambda: "registered with the kubelet" in self._handler_log()[since:],
            timeout=timeout,
            what=f"the kubelet of {self.node.name} to register gpu-handler",
            process=self.handler,
        )

    @property
    def handler_metrics_url(self) -> str:
        """gpu-handler's ``/metrics``, served on loopback (no proxy in front of a host process)."""
        return f"http://127.0.0.1:{self._handler_metrics_port}/metrics"

    def handler_log_size(self) -> int:
        return len(self._handler_log())

    def _handler_log(self) -> str:
        try:
            return self.handler.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _process(self, name: str, module: str, args: list[str], logs: Path) -> ManagedProcess:
        return ManagedProcess(
            name=f"{name}[{self.node.name}]",
            argv=[sys.executable, "-m", module, *args],
            log_path=logs / f"{name}.log",
        )

    def _common(self) -> list[str]:
        return [
            f"--kubeconfig={self.node.component_kubeconfig}",  # through the node's ApiLink if any
            f"--node-name={self.node.name}",
            f"--sysfs-root={self.node.host.root}",
        ]

    def _agent_args(self) -> list[str]:
        return [
            *self._common(),
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--host-root={self.node.host.root}",
            f"--pci-ids={self._pci_ids}",
            "--udev=false",
            "--resync-period=30",
        ]

    def _handler_argv(self) -> list[str]:
        host = self.node.host
        return [
            *self._common(),
            f"--metrics-bind-address=127.0.0.1:{self._handler_metrics_port}",
            "--backend=simulated-nvidia",
            f"--sim-state-dir={host.nvml_state}",
            f"--dev-root={host.dev}",
            f"--proc-root={host.root / 'proc'}",
            f"--kubelet-root={self.node.kubelet.paths.root}",
            f"--cdi-dir={self.node.cdi_dir}",
            f"--mps-root={self.mps_root}",
            f"--driver-root={self.driver_root.root}",
            f"--host-run={self.node.base / 'run'}",
            f"--cdi-hook-source={self._plane.config.bin_dir / 'nvidia-cdi-hook'}",
            f"--plugin-instance={self._instance}",
            "--enrich-period=5",
            "--health-quiet-period=5",  # a recovery within seconds, for the health tests
            "--attribution-interval=2",  # per-Pod series within seconds, for the attribution tests
            "--usage-status-interval=2",
            *self._handler_args,
        ]


def mark_driver_ready(plane: ControlPlane, gpu_names: Sequence[str]) -> None:
    """Reports ``DriverReady=True`` on each PhysicalGPU, as the GPU validator would (own field manager)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for name in gpu_names:
        body = {
            "apiVersion": "gpu.deckhouse.io/v1alpha1",
            "kind": "PhysicalGPU",
            "metadata": {"name": name},
            "status": {
                "conditions": [
                    {
                        "type": "DriverReady",
                        "status": "True",
                        "reason": "ValidatorStandIn",
                        "message": "set by the local cluster's stand-in for the GPU validator",
                        "lastTransitionTime": now,
                    }
                ]
            },
        }
        plane.kubectl(
            "apply",
            "--server-side",
            "--subresource=status",
            f"--field-manager={VALIDATOR_STAND_IN}",
            "--force-conflicts",
            "-f",
            "-",
            input_text=json.dumps(body),
        )


def node_gpus(plane: ControlPlane, node: str) -> list[str]:
    """Names of the node's PhysicalGPUs."""
    out = plane.kubectl(
        "get",
        "physicalgpus",
        "-l",
        f"gpu.deckhouse.io/node={node}",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    )
    return out.split()


def wait_for_offers(
    plane: ControlPlane, node: str, *, cards: int, mark_ready: bool = True, timeout: float = 90.0
) -> None:
    """Until the node's GPUs exist and their offers are published. ``mark_ready`` marks them
    DriverReady by hand first (:func:`mark_driver_ready`); without it gpu-controller's validator
    flow must (:mod:`pkg.devcluster.gpustack`)."""
    wait_until(
        lambda: len(node_gpus(plane, node)) == cards, timeout=timeout, what=f"{cards} PhysicalGPUs of {node}"
    )
    if mark_ready:
        mark_driver_ready(plane, node_gpus(plane, node))
    wait_until(
        lambda: bool(
            plane.kubectl(
                "get", "resourceslices", f"--field-selector=spec.nodeName={node}", "-o", "name", check=False
            ).strip()
        ),
        timeout=timeout,
        what=f"the ResourceSlices of {node}",
    )
