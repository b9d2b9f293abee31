"""Start, stop and restart a local control plane.

Layout of ``work_dir``: ``pki/`` (certificates), ``etcd/`` (data), ``logs/<component>.log`` and
``kubeconfig`` (admin, client-certificate auth). Ports are chosen free at start so several
control planes (parallel CI jobs, a demo beside a test run) never collide.

Feature gates: the DRA features the project relies on are enabled explicitly on the apiserver,
the scheduler and the controller-manager even where the pinned release already has them on, so a
change of the pinned release cannot silently turn one off. The three control plane components may
come from another release than etcd and kubectl (``control_plane_bin_dir``: the integration tier's
pass against the oldest release we support); what that release must be told differently is in
:mod:`pkg.devcluster.releases`.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import subprocess
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pkg.devcluster import certs
from pkg.devcluster.processes import ManagedProcess, free_port, wait_until
from pkg.devcluster.releases import Release, release_of_binary

log = logging.getLogger(__name__)

# DRADeviceTaints (GA in 1.37): the API server keeps the taints of our slices' devices, the
# scheduler honours them and the device-taint eviction controller evicts for NoExecute ones.
# DRADeviceTaintRules (GA in 1.37): DeviceTaintRule objects, an admin's way to taint devices by hand.
# ResourceHealthStatus (beta, on in 1.37): without it the API server drops a Pod's
# allocatedResourcesStatus, where the kubelet reports our devices' health.
DRA_FEATURE_GATES = {
    "DRAPartitionableDevices": True,
    "DRAConsumableCapacity": True,
    "DRAExtendedResource": True,
    "DRADeviceTaints": True,
    "DRADeviceTaintRules": True,
    "ResourceHealthStatus": True,
}

# The controllers kube-controller-manager runs: DRA's claim controller, garbage collection of owned
# objects, and the ones that make namespaces usable (default service account, its token, cleanup).
CONTROLLERS = (
    "resourceclaim-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
)
# What real nodes need besides: node lifecycle (lifts the not-ready taint, notices a dead kubelet),
# the kube-root-ca.crt ConfigMap every service-account volume mounts, garbage collection of Pods on
# deleted nodes, taint-based eviction (Node and DRA device taints), and the workload controllers
# that run our DaemonSets and Deployments. Not in the default set: node lifecycle would taint the
# kubelet-less Nodes the integration tier creates once their status went unrefreshed for 50 s.
NODE_CONTROLLERS = (
    "node-lifecycle-controller",
    "root-ca-certificate-publisher-controller",
    "pod-garbage-collector-controller",
    "taint-eviction-controller",
    "device-taint-eviction-controller",
    "daemonset-controller",
    "deployment-controller",
    "replicaset-controller",
    "ttl-controller",
    "job-controller",  # Jobs Kueue admits (test_kueue_admission.py)
)


@dataclass
class ControlPlaneConfig:
    bin_dir: Path
    work_dir: Path
    feature_gates: dict[str, bool] = field(default_factory=lambda: dict(DRA_FEATURE_GATES))
    # Resources served straight from etcd (watch cache off), so that etcd compaction reaches their
    # watchers as 410 Gone; tests use configmaps for that and nothing else relies on them.
    uncached_resources: tuple[str, ...] = ("configmaps",)
    # Log every request's metadata (who, verb, resource, response code) to <work_dir>/audit.log,
    # JSON lines: the RBAC audit of the e2e tier reads what each component really called.
    audit: bool = False
    start_timeout: float = 120.0
    with_scheduler: bool = True
    with_controller_manager: bool = True
    controllers: tuple[str, ...] = CONTROLLERS
    # Flags appended to a component's command line, by component (``kube-apiserver``,
    # ``kube-scheduler``, ...); a flag given twice takes the last value. Benchmarks use it to open
    # the scheduler's metrics port and to turn on the API server's audit log.
    extra_args: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # kube-apiserver, kube-scheduler and kube-controller-manager of another release than
    # ``bin_dir``'s (which still gives etcd and kubectl); None: ``bin_dir``'s own.
    control_plane_bin_dir: Path | None = None


CONTROL_PLANE_BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager")


class ControlPlane:
    """etcd + kube-apiserver (+ scheduler, controller-manager) as child processes."""

    def __init__(self, config: ControlPlaneConfig):
        self.config = config
        self.release: Release = release_of_binary(self._binary("kube-apiserver"))
        self.work_dir = config.work_dir
        self.logs_dir = self.work_dir / "logs"
        self.kubeconfig = self.work_dir / "kubeconfig"
        self.audit_log = self.work_dir / "audit.log"
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.apiserver_port = free_port()
        self.pki: certs.CertPaths | None = None
        self.kubelet_client: certs.KeyPair | None = None
        self.processes: dict[str, ManagedProcess] = {}

    @property
    def server_url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.pki = certs.generate(self.work_dir / "pki")
        # The apiserver's identity towards kubelets (logs, exec); kubelets authorise it by webhook.
        self.kubelet_client = certs.issue(
            self.pki,
            self.work_dir / "pki",
            "apiserver-kubelet-client",
            common_name="kube-apiserver-kubelet-client",
            organizations=("system:masters",),
            client=True,
        )
        self._write_kubeconfig()
        self.processes = {
            "etcd": self._process("etcd", self._etcd_args()),
            "kube-apiserver": self._process("kube-apiserver", self._apiserver_args()),
        }
        if self.config.with_scheduler:
            self.processes["kube-scheduler"] = self._process("kube-scheduler", self._scheduler_args())
        if self.config.with_controller_manager:
            self.processes["kube-controller-manager"] = self._process(
                "kube-controller-manager", self._controller_manager_args()
            )
        try:
            self._start("etcd", lambda: self._http_ok(f"{self.etcd_url}/health"))
            self.start_apiserver()
            for name in ("kube-scheduler", "kube-controller-manager"):
                if name in self.processes:
                    self.processes[name].start()
            self._wait_for_default_service_account()
        except BaseException:
            self.stop()
            raise

    def start_apiserver(self) -> None:
        self._start("kube-apiserver", lambda: self._get("/readyz") == "ok")

    def stop_apiserver(self, *, crash: bool = False) -> None:
        proc = self.processes["kube-apiserver"]
        proc.kill() if crash else proc.stop()

    def restart_apiserver(self, *, crash: bool = True) -> None:
        """Restarts kube-apiserver (kill -9 when ``crash``, else SIGTERM) and waits until it is ready
        again. Its clients keep their addresses: the port, certificates and etcd stay the same."""
        self.stop_apiserver(crash=crash)
        self.start_apiserver()

    def restart_etcd(self, *, crash: bool = True) -> None:
        """Restarts etcd on its data folder (kill -9 when ``crash``, else SIGTERM), then waits until
        etcd is healthy and the API server, which reconnects by itself, is ready again."""
        proc = self.processes["etcd"]
        proc.kill() if crash else proc.stop()
        self._start("etcd", lambda: self._http_ok(f"{self.etcd_url}/health"))
        wait_until(
            lambda: self._get("/readyz") == "ok",
            timeout=self.config.start_timeout,
            what="kube-apiserver to reach etcd again",
            process=self.processes["kube-apiserver"],
        )

    def stop(self) -> None:
        for proc in reversed(list(self.processes.values())):
            try:
                proc.stop()
            except Exception:  # keep stopping the others
                log.exception("stopping %s failed", proc.name)

    def logs(self) -> dict[str, Path]:
        return {name: proc.log_path for name, proc in self.processes.items()}

    # -- operations tests need ------------------------------------------------------------------

    def compact_etcd(self) -> int:
        """Compacts etcd at its current revision through etcd's JSON gateway; returns it."""
        status = json.loads(self._post_etcd("/v3/kv/range", {"key": "AA==", "limit": 1}))
        revision = int(status["header"]["revision"])
        self._post_etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def kubectl(self, *args: str, check: bool = True, input_text: str | None = None) -> str:
        result = subprocess.run(
            [str(self.config.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            check=False,
            input=input_text,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    # -- internals -------------------------------------------------------------------------------

    def _binary(self, name: str) -> Path:
        if name in CONTROL_PLANE_BINARIES and self.config.control_plane_bin_dir is not None:
            return self.config.control_plane_bin_dir / name
        return self.config.bin_dir / name

    def _process(self, name: str, args: list[str]) -> ManagedProcess:
        argv = [str(self._binary(name)), *args, *self.config.extra_args.get(name, ())]
        return ManagedProcess(name=name, argv=argv, log_path=self.logs_dir / f"{name}.log")

    def _start(self, name: str, ready: Callable[[], bool]) -> None:
        proc = self.processes[name]
        proc.start()
        wait_until(ready, timeout=self.config.start_timeout, what=f"{name} to become ready", process=proc)

    def _gates(self) -> str:
        gates = self.release.feature_gates(self.config.feature_gates)
        return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))

    def _etcd_args(self) -> list[str]:
        return [
            f"--data-dir={self.work_dir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
            f"--initial-cluster=default=http://127.0.0.1:{self.etcd_peer_port}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]

    def _apiserver_args(self) -> list[str]:
        assert self.pki is not None
        assert self.kubelet_client is not None
        return [
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            f"--tls-cert-file={self.pki.serving_cert}",
            f"--tls-private-key-file={self.pki.serving_key}",
            f"--client-ca-file={self.pki.ca_cert}",
            f"--service-account-key-file={self.pki.sa_pub}",
            f"--service-account-signing-key-file={self.pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.0.0.0/24",
            # Node + NodeRestriction: a kubelet's certificate (system:node:<name>) reaches only its
            # own node's objects, as in a real cluster.
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--kubelet-client-certificate={self.kubelet_client.cert}",
            f"--kubelet-client-key={self.kubelet_client.key}",
            f"--kubelet-certificate-authority={self.pki.ca_cert}",
            "--kubelet-preferred-address-types=InternalIP",
            # As on every real cluster (kubeadm's default): node agents such as gpu-handler's
            # kubelet plugin need privileged containers.
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            # The kubernetes Service endpoint would have to be a routable IP; nothing here needs it.
            "--endpoint-reconciler-type=none",
            f"--feature-gates={self._gates()}",
            f"--watch-cache-sizes={','.join(f'{r}#0' for r in self.config.uncached_resources)}",
            *(
                [f"--runtime-config={','.join(self.release.runtime_config)}"]
                if self.release.runtime_config
                else []
            ),
            "--v=1",
            *self._audit_args(),
        ]

    def _audit_args(self) -> list[str]:
        if not self.config.audit:
            return []
        policy = self.work_dir / "audit-policy.yaml"
        policy.write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
            "rules:\n  - level: Metadata\n"
        )
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ]

    def _component_kubeconfig_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--leader-elect=false",
            f"--feature-gates={self._gates()}",
            "--v=1",
        ]

    def _scheduler_args(self) -> list[str]:
        return self._component_kubeconfig_args()

    def _controller_manager_args(self) -> list[str]:
        assert self.pki is not None
        return [
            *self._component_kubeconfig_args(),
            f"--controllers={','.join(self.config.controllers)}",
            f"--service-account-private-key-file={self.pki.sa_key}",
            f"--root-ca-file={self.pki.ca_cert}",
            "--use-service-account-credentials=false",
        ]

    def _write_kubeconfig(self) -> None:
        assert self.pki is not None
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.server_url, "certificate-authority": str(self.pki.ca_cert)},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate": str(self.pki.admin_cert),
                        "client-key": str(self.pki.admin_key),
                    },
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
        self.kubeconfig.write_text(json.dumps(config, indent=2))
        self.kubeconfig.chmod(0o600)

    def _ssl_context(self) -> ssl.SSLContext:
        assert self.pki is not None
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        context.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return context

    def _get(self, path: str) -> str:
        with urllib.request.urlopen(f"{self.server_url}{path}", context=self._ssl_context(), timeout=5) as r:
            return str(r.read().decode())

    def _http_ok(self, url: str) -> bool:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)

    def _post_etcd(self, path: str, body: dict[str, object]) -> str:
        request = urllib.request.Request(
            f"{self.etcd_url}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return str(response.read().decode())

    def _wait_for_default_service_account(self) -> None:
        if not self.config.with_controller_manager:
            return
        wait_until(
            lambda: (
                json.loads(self._get("/api/v1/namespaces/default/serviceaccounts/default"))["metadata"][
                    "name"
                ]
                == "default"
            ),
            timeout=self.config.start_timeout,
            what="the default service account",
            process=self.processes["kube-controller-manager"],
        )


def default_bin_dir() -> Path:
    """The folder of the built tools: ``$GPU_CP_BIN_DIR`` (make sets it), else the build cache.

    Never builds: a test or a script that finds a tool missing says which make target provides
    it, instead of starting a long build in each of several pytest workers at once.
    """
    env_dir = os.environ.get("GPU_CP_BIN_DIR")
    if env_dir:
        return Path(env_dir)
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        ["bash", str(root / "hack" / "tools" / "build.sh"), "--print-dir", "--cached-only"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the tools are not built: run `make tools` ({out.stderr.strip()})")
    return Path(out.stdout.strip().splitlines()[-1])
