"""``kubectl gpu explain pod/NAME``: which claims a Pod's devices come from (a claim, a template's
claim made or still to be made, the scheduler's extended-resource claim), each explained under its
own heading; a Pod that does not wait for devices is said to be so; exit codes as for a claim."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from pytest_mock import MockerFixture

from pkg.app.kubectlgpu import cli, explain_pod
from pkg.app.kubectlgpu.access import EXIT_NOT_ALLOCATABLE, EXIT_NOT_FOUND, ObjectNotFoundError, Reader
from pkg.app.kubectlgpu.explain import Explained
from pkg.app.kubectlgpu.pod_claims import (
    backing_classes,
    extended_resource_requests,
    not_pending_on_gpus,
    pod_claims,
)
from pkg.dra.explain.report import Report
from pkg.framework.client.builtin_kinds import (
    DEVICE_CLASS,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
)

NS = "ml"


def pod(
    name: str = "train", *, spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None
) -> Any:
    body = spec or {"containers": [{"name": "main", "image": "x"}]}
    return POD.decode({"metadata": {"name": name, "namespace": NS}, "spec": body, "status": status or {}})


def container(name: str, requests: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "x", "resources": {"requests": requests, "limits": requests}, **extra}


def device_class(name: str, extended: str | None = None, created: str = "2026-01-01T00:00:00Z") -> Any:
    spec: dict[str, Any] = {"extendedResourceName": extended} if extended else {}
    return DEVICE_CLASS.decode({"metadata": {"name": name, "creationTimestamp": created}, "spec": spec})


def template(name: str, device_class_name: str) -> Any:
    return RESOURCE_CLAIM_TEMPLATE.decode(
        {
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class_name}}]
                    }
                }
            },
        }
    )


def claim(name: str) -> Any:
    return RESOURCE_CLAIM.decode(
        {
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        }
    )


def no_read(*_: Any) -> Any:
    raise AssertionError("read although not needed")


# -- where each claim comes from ----------------------------------------------------------------


def test_a_named_claim_is_read_by_its_name() -> None:
    p = pod(
        spec={
            "containers": [{"name": "main"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}],
        }
    )
    [found] = pod_claims(p, template=no_read, classes=no_read)
    assert (found.source, found.claim_name, found.would_be) == ("resourceClaimName", "c1", None)
    assert found.heading == 'claim "gpu": ResourceClaim c1'


def test_a_templates_claim_is_the_one_the_pod_status_names() -> None:
    p = pod(
        spec={
            "containers": [{"name": "main"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
        },
        status={"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-gpu-x7k2q"}]},
    )
    [found] = pod_claims(p, template=no_read, classes=no_read)
    assert (found.claim_name, found.would_be) == ("train-gpu-x7k2q", None)
    assert "from ResourceClaimTemplate t" in found.heading


def test_a_template_not_instantiated_yet_gives_the_claim_it_would_make(mocker: MockerFixture) -> None:
    read_template = mocker.Mock(return_value=template("whole", "gpu-h100"))
    p = pod(
        spec={
            "containers": [{"name": "main"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "whole"}],
        }
    )
    [found] = pod_claims(p, template=read_template, classes=no_read)
    read_template.assert_called_once_with("whole")
    assert found.claim_name is None
    assert found.would_be is not None
    raw = RESOURCE_CLAIM.encode(found.would_be)
    assert (raw["metadata"]["namespace"], raw["metadata"]["name"]) == (NS, "train-gpu")
    assert raw["spec"]["devices"]["requests"] == [{"name": "gpu", "exactly": {"deviceClassName": "gpu-h100"}}]
    assert "would make (none yet)" in found.heading


def test_an_extended_resource_gives_the_claim_the_scheduler_would_make(mocker: MockerFixture) -> None:
    classes = mocker.Mock(
        return_value=[device_class("gpu-whole", "gpu.deckhouse.io/gpu"), device_class("other")]
    )
    p = pod(
        "wants-three-whole",
        spec={"containers": [container("train", {"cpu": "1", "gpu.deckhouse.io/gpu": "3"})]},
    )
    [found] = pod_claims(p, template=no_read, classes=classes)
    assert found.source == "extendedResource"
    assert found.claim_name is None
    assert found.heading == (
        "extended resource gpu.deckhouse.io/gpu: 3 of container train (the claim the scheduler would make)"
    )
    assert found.would_be is not None
    # The scheduler's name: container 0, the resource second among the container's sorted requests.
    assert RESOURCE_CLAIM.encode(found.would_be)["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-1",
            "exactly": {"deviceClassName": "gpu-whole", "allocationMode": "ExactCount", "count": 3},
        }
    ]


def test_a_claim_the_scheduler_made_is_read_and_classes_are_not() -> None:
    p = pod(
        spec={"containers": [container("train", {"gpu.deckhouse.io/gpu": "3"})]},
        status={"extendedResourceClaimStatus": {
            "resourceClaimName": "train-extended-resources-ab12",
            "requestMappings": [{
                "containerName": "train", "resourceName": "gpu.deckhouse.io/gpu",
                "requestName": "container-0-request-0",
            }],
        }},
    )  # fmt: skip
    [found] = pod_claims(p, template=no_read, classes=no_read)
    assert found.claim_name == "train-extended-resources-ab12"


def test_resources_no_device_class_backs_make_no_claim() -> None:
    p = pod(spec={"containers": [container("main", {"cpu": "1", "example.com/dongle": "1"})]})
    assert (
        pod_claims(p, template=no_read, classes=lambda: [device_class("gpu", "gpu.deckhouse.io/gpu")]) == []
    )
    assert pod_claims(pod(), template=no_read, classes=no_read) == []  # no domain-prefixed resource: no read


def test_init_containers_reuse_the_devices_of_those_that_run_after_them() -> None:
    p = pod(
        spec={
            "initContainers": [
                container("fetch", {"gpu.deckhouse.io/gpu": "1"}),  # covered by train's 2
                container("warm", {"gpu.deckhouse.io/gpu": "5"}),  # needs 3 more than train's
            ],
            "containers": [container("train", {"gpu.deckhouse.io/gpu": "2"})],
        }
    )
    requests = extended_resource_requests(p, [device_class("g", "gpu.deckhouse.io/gpu")])
    assert [(r.name, r.count, r.containers) for r in requests] == [
        ("container-1-request-0", 3, ("warm",)),
        ("container-2-request-0", 2, ("train",)),
    ]


def test_the_newer_class_backs_a_shared_name_and_every_class_its_implicit_one() -> None:
    backing = backing_classes(
        [
            device_class("new", "gpu.deckhouse.io/gpu", created="2026-02-01T00:00:00Z"),
            device_class("old", "gpu.deckhouse.io/gpu", created="2026-01-01T00:00:00Z"),
            device_class("b-tie", "x.io/tie"),
            device_class("a-tie", "x.io/tie"),
        ]
    )
    assert backing["gpu.deckhouse.io/gpu"] == "new"
    assert backing["x.io/tie"] == "a-tie"  # same age: the lower name
    assert backing["deviceclass.resource.kubernetes.io/old"] == "old"


# -- whether the Pod waits for devices -------------------------------------------------------------


def test_only_an_unscheduled_pending_pod_waits_for_devices() -> None:
    assert not_pending_on_gpus(pod(status={"phase": "Pending"})) is None
    running = pod(spec={"nodeName": "w1", "containers": [{"name": "main"}]}, status={"phase": "Running"})
    assert not_pending_on_gpus(running) == "it is Running on node w1"
    pulling = pod(
        spec={"nodeName": "w1", "containers": [{"name": "main"}]},
        status={"phase": "Pending", "containerStatuses": [{
            "name": "main", "image": "x", "imageID": "", "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "pull access denied"}},
        }]},
    )  # fmt: skip
    assert not_pending_on_gpus(pulling) == (
        "it is scheduled to node w1; its containers wait: main: ImagePullBackOff (pull access denied)"
    )


# -- the command ---------------------------------------------------------------------------------


def reader_of(mocker: MockerFixture, objects: dict[tuple[str, str], Any]) -> Any:
    """A Reader whose ``get`` answers from ``objects`` by (kind, name), else not found."""
    reader = mocker.create_autospec(Reader, instance=True)

    def get(kind: Any, name: str, namespace: str | None = None) -> Any:
        if (kind.kind, name) in objects:
            return objects[(kind.kind, name)]
        raise ObjectNotFoundError(f'{kind.kind} "{name}" not found in namespace "{namespace}"')

    reader.get.side_effect = get
    reader.list_all.return_value = [device_class("gpu-whole", "gpu.deckhouse.io/gpu")]
    return reader


def run(reader: Any, *argv: str) -> tuple[int, str, str]:
    args = cli.parser().parse_args(["explain", *argv])
    out, err = io.StringIO(), io.StringIO()
    try:
        code = cli._explain(reader, args, NS, out, err)
    except ObjectNotFoundError as missing:  # cli.run turns it into its sentence and exit code
        code = missing.exit_code
        err.write(f"error: {missing}\n")
    return code, out.getvalue(), err.getvalue()


WANTS_THREE = pod(
    "wants-three-whole",
    spec={"containers": [container("train", {"gpu.deckhouse.io/gpu": "3"})]},
    status={"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/2 nodes are available: 2 cannot allocate all claims.",
    }]},
)  # fmt: skip
NOT_ALLOCATABLE = Explained(Report(text="3 whole cards asked, 2 match\n", allocatable=False, current=None))


def test_a_pending_pods_extended_resource_is_explained_here_without_creating_anything(
    mocker: MockerFixture,
) -> None:
    reader = reader_of(mocker, {("Pod", "wants-three-whole"): WANTS_THREE})
    compute = mocker.patch.object(explain_pod, "compute_here", return_value=NOT_ALLOCATABLE)
    asked = mocker.patch.object(explain_pod, "answer")
    code, out, err = run(reader, "pod/wants-three-whole", "--strategy", "first-fit")
    assert (code, err) == (EXIT_NOT_ALLOCATABLE, "")
    assert out == (
        "pod ml/wants-three-whole is pending: 0/2 nodes are available: 2 cannot allocate all claims.\n"
        "\n== extended resource gpu.deckhouse.io/gpu: 3 of container train"
        " (the claim the scheduler would make)\n"
        "3 whole cards asked, 2 match\n"
    )
    [(_, synthesized, options), _] = compute.call_args
    assert synthesized.metadata.name == "wants-three-whole-extended-resources"
    assert options.strategy == "first-fit"
    asked.assert_not_called()  # the controller answers only about claims that exist
    assert not reader.client.create.called


def test_a_bare_name_that_is_no_claim_but_a_pod_is_that_pod(mocker: MockerFixture) -> None:
    reader = reader_of(mocker, {("Pod", "wants-three-whole"): WANTS_THREE})
    mocker.patch.object(explain_pod, "compute_here", return_value=NOT_ALLOCATABLE)
    code, out, _ = run(reader, "wants-three-whole")
    assert code == EXIT_NOT_ALLOCATABLE
    assert out.startswith("pod ml/wants-three-whole is pending")


def test_an_existing_claim_of_the_pod_is_asked_like_a_named_claim(mocker: MockerFixture) -> None:
    p = pod(
        spec={"containers": [{"name": "main"}], "resourceClaims": [
            {"name": "gpu", "resourceClaimName": "c1"}, {"name": "gone", "resourceClaimName": "c2"}
        ]},
        status={"phase": "Pending"},
    )  # fmt: skip
    reader = reader_of(mocker, {("Pod", "train"): p, ("ResourceClaim", "c1"): claim("c1")})
    allocatable = Explained(Report(text="allocatable\n", allocatable=True, current=None), ["slower"])
    asked = mocker.patch.object(explain_pod, "answer", return_value=allocatable)
    code, out, err = run(reader, "pod/train", "-o", "json")
    assert code == EXIT_NOT_ALLOCATABLE  # c2 does not exist: the Pod waits for it
    assert asked.call_args.args[1].metadata.name == "c1"
    document = json.loads(out)
    assert (document["kind"], document["pod"], document["pendingOnGPUs"]) == (
        "GPUExplanationList",
        "ml/train",
        True,
    )
    assert [(i["claim"], i["created"], i["allocatable"], i["source"]) for i in document["items"]] == [
        ("c1", True, True, "resourceClaimName"),
        ("c2", False, False, "resourceClaimName"),
    ]
    assert (
        document["items"][1]["report"]
        == "ResourceClaim ml/c2 does not exist: the Pod waits until it is created\n"
    )
    assert err == "warning: c1: slower\n"
    assert yaml.safe_load(run(reader, "pod/train", "-o", "yaml")[1]) == document


def test_a_pod_that_does_not_wait_for_devices_is_said_to_be_so(mocker: MockerFixture) -> None:
    running = pod(spec={"nodeName": "w1", "containers": [{"name": "main"}]}, status={"phase": "Running"})
    cpu_only = pod("cpu", status={"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "message": "0/2 nodes are available: 2 Insufficient cpu."}
    ]})  # fmt: skip
    reader = reader_of(mocker, {("Pod", "train"): running, ("Pod", "cpu"): cpu_only})
    assert run(reader, "pod/train") == (
        0,
        "pod ml/train is not pending on GPUs: it is Running on node w1\n",
        "",
    )
    code, out, _ = run(reader, "pod/cpu")
    assert code == 0
    assert out == (
        f"pod ml/cpu is not pending on GPUs: {explain_pod.NO_GPU}\n"
        "the scheduler says: 0/2 nodes are available: 2 Insufficient cpu.\n"
    )


def test_a_name_that_is_neither_claim_nor_pod_is_not_found(mocker: MockerFixture) -> None:
    reader = reader_of(mocker, {})
    code, out, err = run(reader, "ghost")
    assert (code, out) == (EXIT_NOT_FOUND, "")
    assert err == 'error: ResourceClaim or Pod "ghost" not found in namespace "ml"\n'
    code, _, err = run(reader, "pod/ghost")
    assert code == EXIT_NOT_FOUND
    assert err == 'error: Pod "ghost" not found in namespace "ml"\n'


@pytest.mark.parametrize("target", ["deployment/x", "node/w1"])
def test_another_kind_is_bad_usage(mocker: MockerFixture, target: str) -> None:
    code, _, err = run(reader_of(mocker, {}), target)
    assert code == 2
    assert "explain takes a claim" in err


def test_created_is_parsed_as_time() -> None:  # the age rule compares real timestamps
    assert device_class("x").metadata.creation_timestamp == datetime(2026, 1, 1, tzinfo=UTC)
