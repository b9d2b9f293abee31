"""The ``kubernetes`` Service for Pods on a local node's bridge network: what kube-proxy would do.

Our components in Pods (the chart's Deployments and DaemonSets) reach the API server the in-cluster
way: ``KUBERNETES_SERVICE_HOST``/``_PORT``, which the kubelet sets to the ``kubernetes`` Service's
cluster IP (the first address of the control plane's service range, ``10.0.0.1:443``). No kube-proxy
runs here, and the local API server listens on loopback only, so this installs the one rule
kube-proxy would make for that Service: packets from the node's Pod subnet to ``10.0.0.1:443`` are
DNATed to ``127.0.0.1:<apiserver port>``. Delivering a packet to a loopback address that arrived on
another interface needs ``route_localnet`` on that interface, so the bridge is created here, before
the CNI plugin adopts it (it reuses an existing bridge of its name). The API server's certificate
already names ``10.0.0.1``.

Pods get a route to the Service range through their bridge (the node's CNI configuration). The
rule matches only the node's own subnet, so other control planes on the machine (whose Services
share the address) are not affected. :meth:`remove` deletes the rule; the node deletes its bridge.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

SERVICE_RANGE = "10.0.0.0/24"  # the control plane's --service-cluster-ip-range
SERVICE_IP = "10.0.0.1"
SERVICE_PORT = 443


@dataclass(frozen=True)
class ApiServerRoute:
    bridge: str
    subnet: str
    apiserver_port: int

    def _rule(self) -> list[str]:
        return [
            "PREROUTING",
            "-s", self.subnet,
            "-d", SERVICE_IP,
            "-p", "tcp",
            "--dport", str(SERVICE_PORT),
            "-m", "comment", "--comment", f"gpucp-{self.bridge}-kubernetes",
            "-j", "DNAT",
            "--to-destination", f"127.0.0.1:{self.apiserver_port}",
        ]  # fmt: skip

    def install(self) -> None:
        if not Path("/sys/class/net", self.bridge).exists():
            _run(["ip", "link", "add", "name", self.bridge, "type", "bridge"])
        _run(["ip", "link", "set", self.bridge, "up"])
        Path("/proc/sys/net/ipv4/conf", self.bridge, "route_localnet").write_text("1\n")
        if not self.installed():
            _run(["iptables", "-t", "nat", "-A", *self._rule()])

    def installed(self) -> bool:
        return _run(["iptables", "-t", "nat", "-C", *self._rule()], check=False) == 0

    def remove(self) -> None:
        while self.installed():
            _run(["iptables", "-t", "nat", "-D", *self._rule()])


def _run(argv: list[str], *, check: bool = True) -> int:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result.returncode
