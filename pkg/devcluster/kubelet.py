"""One kubelet per local node, registered with the local control plane as that node.

The kubelet authenticates to the API server with a client certificate for ``system:node:<name>``
(so the Node authorizer and NodeRestriction confine it exactly as in a real cluster) and serves
its own API with a certificate the cluster CA signed, authenticating the API server by client
certificate and authorising everything else by webhook, so ``kubectl logs`` works the real way.

Several kubelets share this machine: each has its own root folder (pods, plugin sockets,
checkpoints), pod-log folder, ports and container runtime. They share the host's address as their
node IP (the kubelet refuses a loopback one) and differ by port; the API server reaches each at
``status.daemonEndpoints``.

Settings this machine needs, and why (docs/testing.md): cgroup v1 is allowed
(``failCgroupV1: false``) with the cgroupfs driver and no per-QoS cgroups or node-allocatable
enforcement; eviction thresholds are relaxed so a small disk never evicts test Pods; image garbage
collection is off because the images cannot be pulled again.
"""

from __future__ import annotations

import json
import socket
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from pkg.devcluster import certs
from pkg.devcluster.processes import ManagedProcess, free_port

DRA_PLUGIN_FOLDERS = ("plugins", "plugins_registry")


def host_address() -> str:
    """The address of the interface the default route leaves by (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("198.51.100.1", 9))  # TEST-NET-2: routed by the default route, never answered
        except OSError as exc:
            raise RuntimeError("a real node needs a non-loopback IPv4 address with a route") from exc
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        raise RuntimeError("a real node needs a non-loopback IPv4 address; only loopback has a route")
    return address


@dataclass(frozen=True)
class KubeletPaths:
    base: Path

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def pod_logs(self) -> Path:
        return self.base / "pod-logs"

    @property
    def config(self) -> Path:
        return self.base / "config.json"

    @property
    def kubeconfig(self) -> Path:
        return self.base / "kubeconfig"

    @property
    def pki(self) -> Path:
        return self.base / "pki"

    def plugin_dir(self, driver: str) -> Path:
        """Where a DRA plugin serves its kubelet-facing socket."""
        return self.root / "plugins" / driver


# The kubelet's side of device health (KEP-4680): it opens our plugin's NodeWatchResources stream
# and writes each prepared device's health into the Pod's containerStatuses[].allocatedResourcesStatus
# only with ResourceHealthStatus on, and carries the plugin's message with ResourceHealthStatusMessage.
# Both are beta and on by default in 1.37 (pkg/features/kube_features.go of v1.37.1); they are set
# explicitly so a change of the pinned release cannot turn health reporting off unnoticed.
KUBELET_FEATURE_GATES = {"ResourceHealthStatus": True, "ResourceHealthStatusMessage": True}


class Kubelet:
    """A kubelet process for node ``name`` that talks to ``runtime_endpoint``."""

    def __init__(
        self,
        *,
        name: str,
        bin_dir: Path,
        paths: KubeletPaths,
        pki: certs.CertPaths,
        server_url: str,
        runtime_endpoint: str,
        node_ip: str,
        labels: dict[str, str],
        log_path: Path,
    ) -> None:
        self.name = name
        self.paths = paths
        self.node_ip = node_ip
        self.port = free_port()
        self.healthz_port = free_port()
        self._pki = pki
        self._server_url = server_url
        self._runtime_endpoint = runtime_endpoint
        self._labels = labels
        self.process = ManagedProcess(
            name=f"kubelet[{name}]",
            argv=[
                str(bin_dir / "kubelet"),
                f"--config={paths.config}",
                f"--kubeconfig={paths.kubeconfig}",
                f"--root-dir={paths.root}",
                f"--cert-dir={paths.pki}",
                f"--hostname-override={name}",
                f"--node-ip={node_ip}",
                f"--node-labels={','.join(f'{k}={v}' for k, v in sorted(labels.items()))}",
                "--v=2",
            ],
            log_path=log_path,
        )

    def start(self) -> None:
        for folder in (self.paths.root, self.paths.pod_logs, self.paths.pki):
            folder.mkdir(parents=True, exist_ok=True)
        for plugin_folder in DRA_PLUGIN_FOLDERS:  # must exist before a plugin creates its sockets
            (self.paths.root / plugin_folder).mkdir(parents=True, exist_ok=True)
        client = certs.issue(
            self._pki,
            self.paths.pki,
            "kubelet-client",
            common_name=f"system:node:{self.name}",
            organizations=("system:nodes",),
            client=True,
        )
        serving = certs.issue(
            self._pki,
            self.paths.pki,
            "kubelet-serving",
            common_name=self.name,
            server_ips=(self.node_ip, "127.0.0.1"),
            server_names=(self.name,),
        )
        self.paths.kubeconfig.write_text(json.dumps(self._kubeconfig(client), indent=2))
        self.paths.kubeconfig.chmod(0o600)
        self.paths.config.write_text(json.dumps(self._config(serving), indent=2))
        self.process.start()

    def stop(self) -> None:
        self.process.stop(grace=15.0)

    def healthy(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2) as response:
            return bool(response.status == 200)

    def _kubeconfig(self, client: certs.KeyPair) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self._server_url, "certificate-authority": str(self._pki.ca_cert)},
                }
            ],
            "users": [
                {
                    "name": "kubelet",
                    "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "kubelet"}}],
            "current-context": "local",
        }

    def _config(self, serving: certs.KeyPair) -> dict[str, object]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.node_ip,
            "port": self.port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.healthz_port,
            "tlsCertFile": str(serving.cert),
            "tlsPrivateKeyFile": str(serving.key),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self._pki.ca_cert)},
            },
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": self._runtime_endpoint,
            "podLogsDir": str(self.paths.pod_logs),
            "cgroupDriver": "cgroupfs",
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "failCgroupV1": False,
            "failSwapOn": False,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "nodeStatusUpdateFrequency": "2s",
            "nodeStatusReportFrequency": "10s",
            "syncFrequency": "5s",
            "fileCheckFrequency": "5s",
            "serializeImagePulls": False,
            "resolvConf": "/etc/resolv.conf",
            "shutdownGracePeriod": "0s",
            "maxPods": 50,
            "featureGates": dict(KUBELET_FEATURE_GATES),
        }
