"""``kubectl gpu explain`` of an allocated claim, and of a Pod past scheduling, shows what gpu-handler
reports of each device: a failed Prepare (why the Pod waits in ContainerCreating) or an unhealthy
device first, with its reason and message, then every device's Ready and Healthy conditions."""

from __future__ import annotations

import io
import json
from typing import Any

import yaml
from pytest_mock import MockerFixture
from testutil.unit.app.kubectlgpu.kubectl_gpu_objects import DRIVER, claim

from pkg.app.kubectlgpu import cli, explain_pod
from pkg.app.kubectlgpu import explain as explain_module
from pkg.app.kubectlgpu.access import ForbiddenError, ObjectNotFoundError, Reader
from pkg.app.kubectlgpu.explain import Explained
from pkg.dra.explain.report import Report
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

NS = "ml"
POOL = "gpus/w1"
CARD = "gpu-0000-3b-00-0"
FAILED = {
    "type": "Ready",
    "status": "False",
    "reason": "IntervalConflict",
    "message": "asks for time slice Short, but the card is time-sliced Long",
    "lastTransitionTime": "2026-11-29T02:00:00Z",
}
PREPARED = FAILED | {"status": "True", "reason": "Prepared", "message": "prepared"}
HEALTHY = {
    "type": "Healthy",
    "status": "True",
    "reason": "Healthy",
    "message": "",
    "lastTransitionTime": "2026-11-29T02:00:00Z",
}
XID = HEALTHY | {"status": "False", "reason": "Xid48DoubleBitEccError", "message": "XID 48 on the card"}


def gpu_claim(name: str, *conditions: dict[str, Any]) -> Any:
    raw = claim(
        NS,
        name,
        devices=[(POOL, CARD, None)],
        pods=("train",),
        status_devices=[
            {"driver": "other.example.com", "pool": POOL, "device": CARD},
            {"driver": DRIVER, "pool": POOL, "device": CARD, "conditions": list(conditions)},
        ],
    )
    raw["metadata"]["uid"] = f"uid-{name}"
    raw["spec"] = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}
    return RESOURCE_CLAIM.decode(raw)


def scheduled_pod(phase: str, *, waiting: str | None = None) -> Any:
    status: dict[str, Any] = {
        "phase": phase,
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-gpu-x7k2p"}],
    }
    if waiting:
        status["containerStatuses"] = [
            {
                "name": "main",
                "image": "x",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": waiting}},
            }
        ]
    spec = {
        "nodeName": "w1",
        "containers": [{"name": "main", "image": "x"}],
        "resourceClaims": [
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            {"name": "byname", "resourceClaimName": "shared"},
        ],
    }
    return POD.decode({"metadata": {"name": "train", "namespace": NS}, "spec": spec, "status": status})


def reader_of(mocker: MockerFixture, objects: dict[tuple[str, str], Any]) -> Any:
    """A Reader whose ``get`` answers from ``objects`` by (kind, name); an exception there is raised."""
    reader = mocker.create_autospec(Reader, instance=True)

    def get(kind: Any, name: str, namespace: str | None = None) -> Any:
        found = objects.get((kind.kind, name))
        if found is None:
            raise ObjectNotFoundError(f'{kind.kind} "{name}" not found in namespace "{namespace}"')
        if isinstance(found, Exception):
            raise found
        return found

    reader.get.side_effect = get
    reader.list_all.side_effect = AssertionError("a scheduled Pod needs no list")
    return reader


def run(reader: Any, *argv: str) -> tuple[int, str, str]:
    args = cli.parser().parse_args(["explain", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = cli._explain(reader, args, NS, out, err)
    return code, out.getvalue(), err.getvalue()


def test_a_pod_stuck_in_container_creating_is_told_its_failed_prepare_first(mocker: MockerFixture) -> None:
    reader = reader_of(
        mocker,
        {
            ("Pod", "train"): scheduled_pod("Pending", waiting="ContainerCreating"),
            ("ResourceClaim", "train-gpu-x7k2p"): gpu_claim("train-gpu-x7k2p", FAILED, HEALTHY),
            ("ResourceClaim", "shared"): ForbiddenError(
                verb="get", resource="resourceclaims.resource.k8s.io", namespace=NS
            ),
        },
    )
    code, out, err = run(reader, "pod/train")
    assert (code, err) == (0, "")  # the exit code is about allocation, which succeeded
    assert out == (
        f"pod ml/train: Prepare of device {CARD} (claim ml/train-gpu-x7k2p) failed on node w1: "
        "IntervalConflict: "
        "asks for time slice Short, but the card is time-sliced Long; the kubelet retries it, and the "
        "Pod's containers wait (ContainerCreating) until it succeeds\n"
        "pod ml/train was allocated its GPUs: it is scheduled to node w1; its containers wait: "
        "main: ContainerCreating\n"
        '\n== claim "gpu": ResourceClaim train-gpu-x7k2p (from ResourceClaimTemplate one-gpu)\n'
        "devices (the conditions gpu-handler reports in status.devices):\n"
        f"  {CARD} on node w1: Ready=False IntervalConflict: asks for time slice Short, but the card is "
        "time-sliced Long; Healthy=True Healthy\n"
        '\n== claim "byname": ResourceClaim shared\n'
        'cannot read it: forbidden: you cannot get resourceclaims.resource.k8s.io in namespace "ml"\n'
    )


def test_a_running_pod_on_a_sick_device_is_told_so_and_json_carries_the_conditions(
    mocker: MockerFixture,
) -> None:
    reader = reader_of(
        mocker,
        {
            ("Pod", "train"): scheduled_pod("Running"),
            ("ResourceClaim", "train-gpu-x7k2p"): gpu_claim("train-gpu-x7k2p", PREPARED, XID),
        },
    )
    code, out, _ = run(reader, "pod/train")
    assert code == 0
    assert out.splitlines()[:2] == [
        f"pod ml/train: device {CARD} (claim ml/train-gpu-x7k2p) on node w1 is unhealthy: "
        "Xid48DoubleBitEccError: XID 48 on the card",
        "pod ml/train was allocated its GPUs: it is Running on node w1",
    ]
    assert f"  {CARD} on node w1: Ready=True Prepared: prepared; Healthy=False Xid48DoubleBitEccError" in out
    assert '== claim "byname": ResourceClaim shared\ncannot read it: ResourceClaim "shared" not found' in out
    document = json.loads(run(reader, "pod/train", "-o", "json")[1])
    assert document["causes"] == [out.splitlines()[0].removeprefix("pod ml/train: ")]
    [device] = document["devices"]
    assert (device["claim"], device["device"]) == ("train-gpu-x7k2p", CARD)
    assert device["conditions"]["Healthy"]["reason"] == "Xid48DoubleBitEccError"
    assert device["conditions"]["Ready"]["status"] == "True"
    assert yaml.safe_load(run(reader, "pod/train", "-o", "yaml")[1]) == document


def test_a_healthy_running_pod_keeps_its_sentence_and_lists_its_devices(mocker: MockerFixture) -> None:
    reader = reader_of(
        mocker,
        {
            ("Pod", "train"): scheduled_pod("Running"),
            ("ResourceClaim", "train-gpu-x7k2p"): gpu_claim("train-gpu-x7k2p", PREPARED, HEALTHY),
            ("ResourceClaim", "shared"): RESOURCE_CLAIM.decode(
                {"metadata": {"name": "shared", "namespace": NS}}
            ),
        },
    )
    _, out, _ = run(reader, "pod/train")
    assert out.startswith("pod ml/train is not pending on GPUs: it is Running on node w1\n\n== ")
    assert f"  {CARD} on node w1: Ready=True Prepared: prepared; Healthy=True Healthy\n" in out
    assert out.endswith(
        '== claim "byname": ResourceClaim shared\nno device of gpu.deckhouse.io is allocated to it\n'
    )


def test_an_allocated_claim_says_its_failed_prepare_before_the_allocators_report(
    mocker: MockerFixture,
) -> None:
    held = gpu_claim("short", FAILED)
    reader = reader_of(mocker, {("ResourceClaim", "short"): held})
    report = Explained(
        Report(
            text="claim ml/short (strategy best-fit)\nverdict: allocatable\n", allocatable=True, current=None
        )
    )
    mocker.patch.object(explain_module, "from_controller", return_value=report)
    code, out, _ = run(reader, "short")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(
        f"Prepare of device {CARD} (claim ml/short) failed on node w1: IntervalConflict: asks"
    )
    assert lines[1:4] == [
        "devices (the conditions gpu-handler reports in status.devices):",
        f"  {CARD} on node w1: Ready=False IntervalConflict: asks for time slice Short, but the card is "
        "time-sliced Long; Healthy not reported",
        "claim ml/short (strategy best-fit)",
    ]
    [item] = json.loads(run(reader, "short", "-o", "json")[1])["items"]
    assert item["devices"][0]["conditions"]["Ready"]["reason"] == "IntervalConflict"


def test_an_unallocated_claim_prints_no_devices_block(mocker: MockerFixture) -> None:
    pending = RESOURCE_CLAIM.decode({"metadata": {"name": "wants", "namespace": NS}})
    reader = reader_of(mocker, {("ResourceClaim", "wants"): pending})
    report = Explained(Report(text="verdict: NOT allocatable\n", allocatable=False, current=None))
    mocker.patch.object(explain_module, "from_controller", return_value=report)
    code, out, _ = run(reader, "wants")
    assert (code, out) == (5, "verdict: NOT allocatable\n")
    assert "devices" not in json.loads(run(reader, "wants", "-o", "json")[1])["items"][0]


def test_a_pending_pod_is_not_asked_for_device_conditions(mocker: MockerFixture) -> None:
    pending = POD.decode(
        {
            "metadata": {"name": "p", "namespace": NS},
            "spec": {"containers": [{"name": "main"}]},
            "status": {"phase": "Pending"},
        }
    )
    result = explain_pod.explain_pod(
        reader_of(mocker, {("Pod", "p"): pending}), NS, "p", explain_module.Options()
    )
    assert (result.devices, result.causes) == ([], [])
