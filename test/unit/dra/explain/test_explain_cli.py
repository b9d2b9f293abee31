"""``gpu-dra-controller explain``: the report, and exit codes 0 / 1 / 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from kubernetes.client import (
    V1AllocationResult,
    V1NodeSelector,
    V1NodeSelectorRequirement,
    V1NodeSelectorTerm,
)
from pytest_mock import MockerFixture, MockType
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact, mig_class

from api.gpu.v1alpha1 import ExplanationOutcome
from pkg.app.gpu_dra_controller import main as controller_main
from pkg.dra.explain.cli import run
from pkg.dra.explain.cluster import ClusterError, load_cluster
from pkg.dra.explain.render import describe_allocation, node_of
from pkg.framework.client import NotFoundError
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NAMESPACE, RESOURCE_CLAIM, RESOURCE_SLICE

ROOT = Path(__file__).resolve().parents[4]
SAMPLE = str(ROOT / "config" / "samples" / "explain-bundle.yaml")


def explain(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_allocatable_claim_exits_0_and_says_what_it_would_get() -> None:
    code, out, _ = explain("ml/inference", "--bundle", SAMPLE)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "claim ml/inference (strategy best-fit)"
    # Only the devices the class selects are counted and listed; the rest is one line.
    assert lines[1] == "  request gpu: 4 devices of class gpu-mig-1g (3 fits, 1 already allocated)"
    # best fit: slice 2 next to the taken slice 3, keeping 0-1 free for a 2g
    assert lines[2].split() == ["fits", "gpu.deckhouse.io/gpus/worker-1/gpu-0000-02-00-0-mig-14-2"]
    assert "already allocated    gpu.deckhouse.io/gpus/worker-1/gpu-0000-02-00-0-mig-14-3" in out
    assert "    7 other devices are not of class gpu-mig-1g (--all lists them)" in lines
    assert "selector false" not in out
    device = "gpu.deckhouse.io/gpus/worker-1/gpu-0000-02-00-0-mig-14-2"
    assert f"result: allocatable: gpu -> {device} on node worker-1" in lines
    # What the MIG instance takes from its card, and what the card has left with slice 3 taken too.
    assert lines[-3:] == [
        f"  gpu -> {device} (exclusive)",
        "    takes from counter set gpu-0000-02-00-0: memory 5952Mi, memory-slice-2 1, multiprocessors 14, "
        "copy-engines 1, decoders 1",
        "    left on gpu-0000-02-00-0: memory 12672Mi/24Gi, memory slices free: 0, 1 (of 4), "
        "multiprocessors 28/56, copy-engines 2/4, decoders 2/4",
    ]


def test_shared_device_shows_the_rounded_share_and_what_is_left() -> None:
    code, out, _ = explain("ml/share", "--bundle", SAMPLE)
    assert code == 0
    lines = out.splitlines()
    start = lines.index("consumes:")
    assert lines[start + 1] == "  gpu -> gpu.deckhouse.io/gpus/worker-2/gpu-0000-03-00-0-ts (shared)"
    assert (
        "    sharePercent: requested 25 -> 30 (rounded up by validRange min 10, max 100, step 10); "
        "other shares hold 40; 30 of 100 left"
    ) in lines
    assert (
        "    memory: 0 (nothing requested: the policy's default 0); other shares hold 0; 24Gi of 24Gi left"
        in lines
    )
    # ml/batch's share charged the card's counters already; a second share takes none.
    assert (
        "    takes nothing from counter set gpu-0000-03-00-0: "
        "another share of the device already holds its counters"
    ) in lines
    assert lines[-1] == (
        "    left on gpu-0000-03-00-0: memory 0/24Gi, memory slices free: none (of 4), multiprocessors 0/56"
    )


def test_unallocatable_claim_exits_1_and_names_what_holds_the_blocked_device() -> None:
    code, out, _ = explain("ml/training", "--bundle", SAMPLE)
    assert code == 1
    # The 1g.6gb on slice 3 (claim ml/notebook) sits where the second 2g.12gb would go.
    assert (
        "counters exhausted   gpu.deckhouse.io/gpus/worker-1/gpu-0000-02-00-0-mig-5-2: "
        "its part of card gpu-0000-02-00-0 is held by the MIG 1g.6gb device of claim ml/notebook"
    ) in out
    assert (
        out.splitlines()[-1]
        == "result: NOT allocatable: cannot allocate all claims (retry when capacity changes)"
    )


def test_first_fit_and_all_devices() -> None:
    code, out, _ = explain("ml/inference", "--bundle", SAMPLE, "--strategy", "first-fit", "--all")
    assert code == 0
    assert "(strategy first-fit)" in out
    # The publisher lists placements top down, so first fit also meets slice 2 first here.
    assert "mig-14-2 on node worker-1" in next(
        line for line in out.splitlines() if line.startswith("result:")
    )
    assert out.count("selector false ") == 7  # one line per device


def test_max_devices_limits_the_listing() -> None:
    _, out, _ = explain("ml/inference", "--bundle", SAMPLE, "--max-devices", "1")
    assert "... 3 more (--all lists every device)" in out


def test_an_allocated_claim_is_noted() -> None:
    code, out, _ = explain("ml/notebook", "--bundle", SAMPLE)
    assert code == 0
    assert out.startswith("note: ml/notebook is already allocated: gpu -> ")


def test_node_restricts_the_search() -> None:
    code, out, _ = explain("ml/inference", "--bundle", SAMPLE, "--node", "elsewhere")
    assert code == 1
    assert "request gpu: 0 devices of class gpu-mig-1g (none)" in out
    assert "  cause: request gpu: no devices are published on node elsewhere" in out
    assert out.splitlines()[-1].endswith("(retry when capacity changes)")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ml/missing", "--bundle", SAMPLE], "ResourceClaim ml/missing not found in"),
        (["no-slash", "--bundle", SAMPLE], "expected <namespace>/<name>"),
        (["ml/x", "--bundle", "/nonexistent/bundle.yaml"], "/nonexistent/bundle.yaml: cannot read"),
    ],
)
def test_bad_input_exits_2_with_a_message(argv: list[str], message: str) -> None:
    code, out, err = explain(*argv)
    assert code == 2
    assert out == ""
    assert message in err


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        run(["--bundle"])
    assert caught.value.code == 2


def test_the_controller_binary_delegates_explain() -> None:
    assert controller_main(["explain", "ml/training", "--bundle", SAMPLE]) == 1


def test_cluster_snapshot_from_a_client(mocker: MockerFixture) -> None:
    kube = mocker.MagicMock()
    slices, classes = a30_pool(), [mig_class("1g")]
    claims = [claim("c", exact("gpu", "mig-1g"), namespace="ns")]
    kube.list.side_effect = lambda kind: {DEVICE_CLASS: (classes, "1"), RESOURCE_CLAIM: (claims, "1")}[kind]
    page = {"items": [RESOURCE_SLICE.encode(s) for s in slices]}
    kube.list_page_json.return_value = json.dumps(page).encode()
    kube.get.side_effect = NotFoundError(status=404, reason="NotFound", message="namespace ns not found")
    snapshot = load_cluster(kubeconfig=None, namespace="ns", node=None, client=kube)
    assert set(snapshot.claims) == {"ns/c"}
    # Read through the slice reader: the very objects, as the API's JSON form shows them.
    assert [RESOURCE_SLICE.encode(s) for s in snapshot.slices] == page["items"]
    assert snapshot.namespace_labels("ns") == {}
    assert kube.get.call_args.args[0] is NAMESPACE


def test_a_malformed_slice_in_the_cluster_is_named(mocker: MockerFixture) -> None:
    kube = mocker.MagicMock()
    kube.list.return_value = ([], "1")
    bad = RESOURCE_SLICE.encode(a30_pool()[1])
    bad["spec"]["devices"][0]["capacity"]["memory"] = {"value": 5}
    kube.list_page_json.return_value = json.dumps({"items": [bad]}).encode()
    name, device = bad["metadata"]["name"], bad["spec"]["devices"][0]["name"]
    with pytest.raises(
        ClusterError, match=f"cannot read the ResourceSlices: ResourceSlice {name}: device {device}"
    ):
        load_cluster(kubeconfig=None, namespace="ns", node=None, client=kube)


def test_a_missing_node_is_a_cluster_error(mocker: MockerFixture) -> None:
    kube = mocker.MagicMock()
    kube.list.return_value = ([], "1")
    kube.list_page_json.return_value = b'{"items": []}'
    kube.get.side_effect = NotFoundError(status=404, reason="NotFound", message='nodes "n1" not found')
    with pytest.raises(ClusterError, match='not found: nodes "n1" not found'):
        load_cluster(kubeconfig=None, namespace="ns", node="n1", client=kube)


def test_unreadable_kubeconfig_is_a_cluster_error(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="cannot load the kubeconfig"):
        load_cluster(kubeconfig=str(tmp_path / "missing"), namespace="ns", node=None)


def test_node_descriptions() -> None:
    pinned = V1NodeSelector(
        node_selector_terms=[
            V1NodeSelectorTerm(
                match_fields=[V1NodeSelectorRequirement(key="metadata.name", operator="In", values=["n1"])]
            )
        ]
    )
    labelled = V1NodeSelector(
        node_selector_terms=[
            V1NodeSelectorTerm(
                match_expressions=[V1NodeSelectorRequirement(key="zone", operator="In", values=["a"])]
            )
        ]
    )
    assert node_of(pinned) == "node n1"
    assert node_of(labelled) == "nodes matching the allocation's node selector"
    assert node_of(None) == "any node"
    assert describe_allocation(V1AllocationResult()) == "no devices on any node"


# -- cluster mode: asked of gpu-dra-controller first ------------------------------------------------


def _controller(mocker: MockerFixture, monkeypatch: pytest.MonkeyPatch, answer: object) -> MockType:
    """The cluster's client (its claim read) and the controller's answer, faked."""
    import pkg.dra.explain.cli as cli_module

    kube: MockType = mocker.MagicMock()
    kube.get.return_value = RESOURCE_CLAIM.decode(
        {"metadata": {"name": "c", "namespace": "ns", "uid": "u"}, "spec": {}}
    )

    def ask(client: object, claim: object, spec: object, *, timeout: float) -> object:
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(cli_module, "_client", lambda kubeconfig: kube)
    monkeypatch.setattr(cli_module, "ask", ask)
    return kube


def test_cluster_mode_prints_the_controllers_answer(
    monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    from pkg.dra.explain.request import Answer

    _controller(
        mocker,
        monkeypatch,
        Answer(
            outcome=ExplanationOutcome.ALLOCATABLE,
            report="claim ns/c (strategy best-fit)\n",
            current_allocation="gpu -> d/p/x on node n",
        ),
    )
    code, out, err = explain("ns/c")
    assert (code, err) == (0, "")
    assert out == "note: ns/c is already allocated: gpu -> d/p/x on node n\nclaim ns/c (strategy best-fit)\n"


def test_cluster_mode_falls_back_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    from pkg.dra.explain.request import NotServedError

    kube = _controller(mocker, monkeypatch, NotServedError("the ClaimExplanation API is not installed"))
    import pkg.dra.explain.cli as cli_module

    loaded: list[object] = []

    def load_cluster(**kw: object) -> object:
        loaded.append(kw["client"])
        raise ClusterError("offline")

    monkeypatch.setattr(cli_module, "load_cluster", load_cluster)
    code, _, err = explain("ns/c")
    assert code == 2
    assert err.splitlines() == [
        "warning: the ClaimExplanation API is not installed; computing the explanation here (slower)",
        "error: offline",
    ]
    assert loaded == [kube]  # the same client, read locally


def test_cluster_mode_error_answer_exits_2(monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture) -> None:
    from pkg.dra.explain.request import Answer

    _controller(
        mocker,
        monkeypatch,
        Answer(outcome=ExplanationOutcome.ERROR, report="", reason="node ghost not found"),
    )
    assert explain("ns/c", "--node", "ghost") == (2, "", "error: node ghost not found\n")


def test_cluster_mode_missing_claim_exits_2(monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture) -> None:
    kube = _controller(mocker, monkeypatch, AssertionError("not asked"))
    kube.get.side_effect = NotFoundError(status=404, reason="NotFound", message="gone")
    assert explain("ns/c") == (2, "", "error: ResourceClaim ns/c not found in the cluster\n")


def test_cluster_mode_without_the_right_to_get_the_claim_computes_here(
    monkeypatch: pytest.MonkeyPatch,
    mocker: MockerFixture,
) -> None:
    """The controller's own account lists claims but may not get one: it falls back, never fails."""
    from pkg.framework.client import ApiError

    kube = _controller(mocker, monkeypatch, AssertionError("not asked"))
    kube.get.side_effect = ApiError(status=403, reason="Forbidden", message="no get")
    import pkg.dra.explain.cli as cli_module

    def load_cluster(**kw: object) -> object:
        raise ClusterError("offline")

    monkeypatch.setattr(cli_module, "load_cluster", load_cluster)
    code, _, err = explain("ns/c")
    assert code == 2
    assert err.splitlines() == [
        "warning: cannot get ResourceClaim ns/c (Forbidden); computing the explanation here (slower)",
        "error: offline",
    ]


def test_cluster_mode_other_api_errors_exit_2(monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture) -> None:
    from pkg.framework.client import ApiError

    kube = _controller(mocker, monkeypatch, AssertionError("not asked"))
    kube.get.side_effect = ApiError(status=500, reason="InternalError", message="etcd down")
    code, out, err = explain("ns/c")
    assert (code, out) == (2, "")
    assert err.startswith("error: cannot read the cluster: 500 InternalError")


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_json_and_yaml_carry_the_verdict_and_the_report(output: str) -> None:
    code, text, _ = explain("ml/training", "--bundle", SAMPLE)
    code_data, out, _ = explain("ml/training", "--bundle", SAMPLE, "-o", output)
    document = json.loads(out) if output == "json" else yaml.safe_load(out)
    assert code == code_data == 1
    assert document["claim"] == "ml/training"
    assert document["report"] == text  # the same content as the text
    assert document["allocatable"] is False
    assert document["retry"] is True
    [cause] = document["causes"]
    assert cause["kind"] == "HeldByOthers"
    assert cause["facts"]["holders"] == ["ml/notebook"]
    assert f"  cause: request gpu: {cause['text']}" in text.splitlines()
