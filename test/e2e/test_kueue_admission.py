"""Kueue admits Jobs that ask for our classes by the quota our sample mapping gives them.

Kueue's controller manager (built from ``sigs.k8s.io/kueue``, ``hack/tools/kueue``) runs against
the test control plane with its own CRDs, its ``DynamicResourceAllocation`` feature gate on and
``config/samples/kueue-mapping.yaml``'s ``deviceClassMappings`` (KEP-2941): a Pod's devices from a
ResourceClaimTemplate of class ``gpu-physical`` count as ``gpu.deckhouse.io/gpu``, of
``gpu-mig-1g`` as ``gpu.deckhouse.io/mig-1g``. The ClusterQueue allows one of each at a time, so of
two Jobs per class one is admitted and runs on the real node while the other waits, and is
admitted once the first has finished.

No Kueue webhook is registered with the API server (nothing routes to a webhook here), so the Jobs
are created suspended with their queue's label, as Kueue's Job webhook would leave them. Kueue's
metrics certificate path is fixed (``/etc/kueue/metrics/certs``): the process runs in a mount
namespace of its own whose ``/etc`` is an overlay holding a certificate from the cluster's CA, so
the machine's ``/etc`` is never written.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pkg.devcluster import certs
from pkg.devcluster.cluster import ControlPlane, default_bin_dir
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.images import BUSYBOX_IMAGE
from pkg.devcluster.processes import ManagedProcess, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
MAPPING = ROOT / "config" / "samples" / "kueue-mapping.yaml"
KUEUE_NAMESPACE = "kueue-system"
QUEUE = "gpus"
# Resources counted from each class (the sample's mapping) and the ClusterQueue's quota of them.
QUOTA = {"gpu.deckhouse.io/gpu": 1, "gpu.deckhouse.io/mig-1g": 1}
JOBS = {"whole-1": "gpu-physical", "whole-2": "gpu-physical", "mig-1": "gpu-mig-1g", "mig-2": "gpu-mig-1g"}
# In a private mount namespace: /etc as an overlay, the metrics certificate where Kueue reads it.
_IN_OWN_ETC = textwrap.dedent(
    """\
    set -e; folder="$1"; shift
    mkdir -p "$folder/etc-upper" "$folder/etc-work"
    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$folder/etc-upper,workdir=$folder/etc-work" /etc
    mkdir -p /etc/kueue/metrics/certs
    cp "$folder/certs/tls.crt" "$folder/certs/tls.key" /etc/kueue/metrics/certs/
    exec "$@"
    """
)


def _configuration(folder: Path) -> dict[str, Any]:
    """Kueue's configuration: the sample's resource mapping, plus where it listens here."""
    config: dict[str, Any] = yaml.safe_load(MAPPING.read_text())
    config.update(
        namespace=KUEUE_NAMESPACE,
        leaderElection={"leaderElect": False},
        health={"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
        metrics={"bindAddress": f"127.0.0.1:{free_port()}"},
        webhook={"host": "127.0.0.1", "port": free_port(), "certDir": str(folder / "certs")},
        internalCertManagement={"enable": False},
        integrations={"frameworks": ["batch/job"]},
    )
    return config


@pytest.fixture
def kueue(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[ManagedProcess]:
    bins = default_bin_dir()
    crds = (bins / "kueue-crd").resolve()
    control_plane.kubectl("apply", "--server-side", "--field-manager=kueue", "-f", str(crds))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(crds))
    control_plane.kubectl("create", "namespace", KUEUE_NAMESPACE, check=False)
    assert control_plane.pki is not None
    pair = certs.issue(
        control_plane.pki, tmp_path / "certs", "kueue", common_name="kueue", server_ips=("127.0.0.1",)
    )
    pair.cert.rename(tmp_path / "certs" / "tls.crt")
    pair.key.rename(tmp_path / "certs" / "tls.key")
    (tmp_path / "kueue.yaml").write_text(yaml.safe_dump(_configuration(tmp_path)))
    own_etc = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "bash",
        "-c",
        _IN_OWN_ETC,
        "kueue",
        str(tmp_path),
    ]
    proc = ManagedProcess(
        name="kueue",
        argv=[
            *own_etc,
            str(bins / "kueue"),
            f"--config={tmp_path / 'kueue.yaml'}",
            f"--kubeconfig={control_plane.kubeconfig}",
            "--feature-gates=DynamicResourceAllocation=true,VisibilityOnDemand=false",
        ],
        log_path=tmp_path / "kueue.log",
    )
    proc.start()
    try:
        yield proc
    finally:
        # While Kueue runs: it removes the finalizers it put on Workloads and queues.
        for kind, where in (
            ("jobs", ("-n", namespace, "--cascade=foreground")),
            ("workloads.kueue.x-k8s.io,localqueues.kueue.x-k8s.io", ("-n", namespace)),
            ("clusterqueues.kueue.x-k8s.io,resourceflavors.kueue.x-k8s.io", ()),
        ):
            control_plane.kubectl("delete", kind, "--all", *where, "--timeout=60s", check=False)
        proc.stop()


def _objects(namespace: str, node: str) -> list[dict[str, Any]]:
    queue = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": QUEUE},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": list(QUOTA),
                        "flavors": [
                            {
                                "name": "default",
                                "resources": [{"name": r, "nominalQuota": n} for r, n in QUOTA.items()],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": QUEUE},
        },
    ]
    templates = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": cls, "namespace": namespace},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}
            },
        }
        for cls in sorted(set(JOBS.values()))
    ]
    jobs = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"kueue.x-k8s.io/queue-name": QUEUE},
            },
            "spec": {
                "suspend": True,  # what Kueue's webhook would set
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": node},
                        "restartPolicy": "Never",
                        "terminationGracePeriodSeconds": 1,
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": cls}],
                        "containers": [
                            {
                                "name": "main",
                                "image": BUSYBOX_IMAGE,
                                "imagePullPolicy": "Never",
                                "command": ["sh", "-c", "ls /dev/nvidia* && sleep 4"],
                                "resources": {"claims": [{"name": "gpu"}]},
                            }
                        ],
                    }
                },
            },
        }
        for name, cls in JOBS.items()
    ]
    return [*queue, *templates, *jobs]


def _jobs(plane: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    found = json.loads(plane.kubectl("get", "jobs", "-n", namespace, "-o", "json"))["items"]
    return {j["metadata"]["name"]: j for j in found}


def _succeeded(job: dict[str, Any]) -> bool:
    return int((job.get("status") or {}).get("succeeded") or 0) == 1


def _workloads(plane: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    """Kueue's Workloads by the name of the Job that owns them."""
    found = json.loads(plane.kubectl("get", "workloads.kueue.x-k8s.io", "-n", namespace, "-o", "json"))[
        "items"
    ]
    return {w["metadata"]["ownerReferences"][0]["name"]: w for w in found}


def _condition(workload: dict[str, Any], kind: str) -> dict[str, Any]:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


@pytest.mark.timeout(900)  # the first test of a session may wait for another run's real nodes
def test_jobs_of_our_classes_are_admitted_within_quota_and_wait_beyond_it(
    control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents, kueue: ManagedProcess
) -> None:
    control_plane.kubectl(
        "apply", "-f", "-", input_text=yaml.safe_dump_all(_objects(namespace, gpu_node.node.name))
    )

    # One Job per class is admitted (unsuspended); its twin waits for quota, suspended.
    def first_round() -> bool:
        workloads = _workloads(control_plane, namespace)
        return len(workloads) == len(JOBS) and sum(
            _condition(w, "Admitted").get("status") == "True" for w in workloads.values()
        ) == len(QUOTA)

    wait_until(first_round, timeout=60, what="Kueue to admit one Job per class", process=kueue)
    workloads, jobs = _workloads(control_plane, namespace), _jobs(control_plane, namespace)
    admitted = {n for n, w in workloads.items() if _condition(w, "Admitted").get("status") == "True"}
    assert sorted(JOBS[n] for n in admitted) == ["gpu-mig-1g", "gpu-physical"]
    usage = {
        r: q
        for n in admitted
        for assignment in workloads[n]["status"]["admission"]["podSetAssignments"]
        for r, q in assignment["resourceUsage"].items()
    }
    assert usage == {r: str(n) for r, n in QUOTA.items()}  # counted through the sample's mapping
    for name in set(JOBS) - admitted:
        reserved = _condition(workloads[name], "QuotaReserved")
        assert reserved.get("status") == "False"
        assert "insufficient unused quota" in reserved.get("message", ""), reserved
        assert jobs[name]["spec"]["suspend"] is True
        assert not _succeeded(jobs[name])

    # The admitted ones run on the real node; then the others are admitted and run too.
    wait_until(
        lambda: all(_succeeded(j) for j in _jobs(control_plane, namespace).values()),
        timeout=240,
        what="every Job to run to completion, one per class at a time",
        process=kueue,
    )
    finished = _workloads(control_plane, namespace)
    assert all(_condition(w, "Finished").get("status") == "True" for w in finished.values())
