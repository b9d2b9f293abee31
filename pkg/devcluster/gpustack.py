"""gpu-controller and the node components on real nodes, with stand-in images for the node components.

What runs where, and why:

* **gpu-controller** runs as a process on this machine, with its node components in one namespace.
  It is the code under test: DriverReady from the validator Pod, the node gate labels, the
  DaemonSets rendered from the configuration ConfigMap, GPUClasses turned into DeviceClasses.
* **gpu-dra-controller** runs as a process too (:meth:`GpuStack.start_dra_controller`), as the chart
  installs it beside gpu-controller: it answers ``kubectl gpu explain``.
* **gpu-node-agent and gpu-handler** run as host processes per node
  (:class:`~pkg.devcluster.gpucomponents.GpuComponents`), until their image exists; they are what
  makes PhysicalGPUs, offers and the kubelet plugin. Nothing marks DriverReady by hand here: the
  validator flow does.
* **The node components' DaemonSets** run for real on the nodes (kubelet, containerd), from images
  that stand in for the real ones, because no registry is reachable: the local busybox image
  (``imagePullPolicy: Never``). The stand-in validator does the validator's job on the simulated
  host: it checks the NVIDIA device nodes the node would have (``nvidiactl``, ``nvidia-uvm`` and
  one ``nvidia<N>`` per card) and fails, with a message saying which is missing, when one is not
  there; its readiness probe keeps checking. The stand-ins of gpu-node-agent, gpu-handler,
  nv-hostengine and dcgm-exporter serve their probes' paths with busybox's httpd and nothing else:
  their Pods prove where the DaemonSets land and that a joining node restarts none of them, while
  the host processes above do the components' work.

Each node's simulated host lives under ``<work>/nodes/<node>/host`` (``pkg.devcluster.node``), and a
DaemonSet has one template for every node, so the validator mounts ``<work>/nodes`` at ``/host``
(``hostRoot``) and finds its own node's folder by ``$NODE_NAME`` (the downward API, which every
rendered container gets).

``make demo`` (``hack/demo.py``) and the e2e tier's gpu-controller tests run this flow:
:func:`stand_in_config` gives the ConfigMap's document for a folder of real nodes,
:class:`GpuStack` creates it and starts gpu-controller and each node's processes. (The e2e tier's
kubelet-plugin tests mark DriverReady with :func:`~pkg.devcluster.gpucomponents.mark_driver_ready`
instead: a second gpu-controller on the same cluster would contest the first one's nodes.)
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client import V1ConfigMap, V1ObjectMeta

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.images import BUSYBOX_IMAGE
from pkg.devcluster.node import RealNode
from pkg.devcluster.processes import ManagedProcess, free_port
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import CONFIG_MAP

# The validation: the device nodes a node with a working NVIDIA driver has (gpuhost.py makes them).
VALIDATION = (
    'd="/host/$NODE_NAME/host/dev"; '
    'for f in nvidiactl nvidia-uvm; do test -c "$d/$f" || { echo "missing $d/$f"; exit 1; }; done; '
    'ls "$d"/nvidia[0-9]* >/dev/null 2>&1 || { echo "no card device node in $d"; exit 1; }; '
    "echo validated"
)


def serve(port: int, *paths: str) -> list[str]:
    """A stand-in that answers its probes on ``port`` (200 for ``paths``) and stops on SIGTERM."""
    files = " ".join(paths)
    script = (
        f"mkdir -p /tmp/www && for p in {files}; do echo ok > /tmp/www/$p; done; "
        f"trap 'exit 0' TERM INT; httpd -f -p {port} -h /tmp/www & wait $!"
    )
    return ["sh", "-c", script]


def stand_in_config(nodes_dir: Path) -> dict[str, Any]:
    """The GPUOperatorConfig document for real nodes under ``nodes_dir``: every component, stand-in
    images (see the module docs), udev off (no host network: two nodes share this machine's)."""
    local = {"image": BUSYBOX_IMAGE, "imagePullPolicy": "Never"}
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GPUOperatorConfig",
        "spec": {
            "nodeAgent": {**local, "udev": False, "command": serve(9478, "healthz", "readyz")},
            "validator": {
                **local,
                "hostRoot": str(nodes_dir),
                "command": ["sh", "-c", VALIDATION],
                "readinessCommand": ["sh", "-c", VALIDATION],
            },
            # The stand-in serves no kubelet: no plugin folders from this machine's host, no root.
            "gpuHandler": {
                **local,
                "kubeletPlugin": {"enabled": False},
                "command": serve(8080, "healthz", "readyz"),
            },
            "dcgm": {**local, "command": serve(5555, "ready")},
            "dcgmExporter": {**local, "podResourcesPath": None, "command": serve(9400, "health")},
        },
    }


def config_map(name: str, key: str, document: dict[str, Any]) -> V1ConfigMap:
    """The configuration ConfigMap: ``document`` under ``key`` (gpu-controller's
    ``OPERATOR_CONFIG_KEY``, passed in because this package stays below the API packages)."""
    return V1ConfigMap(metadata=V1ObjectMeta(name=name), data={key: yaml.safe_dump(document)})


class GpuStack:
    """gpu-controller for ``namespace`` (configuration ConfigMap ``config``), and per node its
    gpu-node-agent and gpu-handler (simulated NVIDIA backend) as host processes."""

    def __init__(
        self,
        *,
        plane: ControlPlane,
        work: Path,
        namespace: str,
        config: str,
        config_key: str,
        pci_ids: Path,
        driver_version: str,
    ) -> None:
        self._plane, self._work, self.namespace, self.config = plane, work, namespace, config
        self._config_key, self._pci_ids = config_key, pci_ids
        self._driver_version = driver_version  # the simulated driver's (its stand-in user space)
        self.processes: list[ManagedProcess] = []

    def create_config(self, kube: KubeClient, nodes_dir: Path) -> V1ConfigMap:
        document = stand_in_config(nodes_dir)
        return kube.create(
            CONFIG_MAP, config_map(self.config, self._config_key, document), namespace=self.namespace
        )

    def start_controller(self, *, controllers: str = "*") -> None:
        """gpu-controller; ``controllers`` as its ``--controllers`` flag (a test of one controller
        runs that one alone, so it contests no other gpu-controller's nodes)."""
        self._start(
            "gpu-controller",
            "pkg.app.gpu_controller",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--leader-election-namespace={self.namespace}",
            f"--components-namespace={self.namespace}",
            f"--operator-config={self.config}",
            f"--controllers={controllers}",
        )

    def start_dra_controller(self) -> None:
        """gpu-dra-controller, with its Lease and ledger in the components' namespace as the chart
        runs it: the demo needs it for ``kubectl gpu explain`` (it answers ClaimExplanations)."""
        self._start(
            "gpu-dra-controller",
            "pkg.app.gpu_dra_controller",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--leader-election-namespace={self.namespace}",
        )

    def start_node(self, node: RealNode) -> GpuComponents:
        """The node's gpu-node-agent and gpu-handler (with its kubelet plugin) as host processes."""
        components = GpuComponents(
            node=node, plane=self._plane, pci_ids=self._pci_ids, driver_version=self._driver_version
        )
        components.start()
        self.processes += components.processes
        return components

    def wait(self, check: Callable[[], Any], *, what: str, timeout: float = 120.0) -> Any:
        """Polls ``check`` until it returns something truthy, and returns that; fails at once,
        with its log, when a process of the stack has exited."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            for process in self.processes:
                if not process.running():
                    raise AssertionError(f"{process.name} exited while waiting for {what}:\n{process.tail()}")
            last = check()
            if last:
                return last
            time.sleep(0.3)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last value: {last!r}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    def logs(self) -> dict[str, Path]:
        return {process.name: process.log_path for process in self.processes}

    def _start(self, name: str, module: str, *args: str) -> None:
        process = ManagedProcess(
            name=name,
            argv=[sys.executable, "-m", module, f"--kubeconfig={self._plane.kubeconfig}", *args],
            log_path=self._work / f"{name}.log",
            env={"LOG_LEVEL": "Info"},
        )
        process.start()
        self.processes.append(process)

    def __repr__(self) -> str:
        return f"GpuStack({json.dumps([p.name for p in self.processes])})"
