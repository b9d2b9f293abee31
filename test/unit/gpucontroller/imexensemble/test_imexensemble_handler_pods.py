"""The pods step: one Pod per member of the current hash; other hashes and leavers deleted."""

from __future__ import annotations

from collections.abc import Callable

from testutil.compute_domains import CLIQUE_A, RecordingEnsembleApi

from pkg.framework.client.builtin_kinds import POD
from pkg.gpucontroller.imexensemble.internal.handler.pods import PodsHandler
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState
from pkg.gpucontroller.imexensemble.render import ANNOTATION_CLIQUE, LABEL_NODES_HASH, ensemble_name

StateOf = Callable[..., EnsembleState]


def test_one_pinned_pod_per_member_mounting_the_clique_config_map(
    api: RecordingEnsembleApi, state: StateOf
) -> None:
    PodsHandler(api=api).handle(state(members={"node-x": 0, "node-y": 1}))
    pods = api.made("create_pod")
    assert [(p.spec.node_name, p.metadata.namespace) for p in pods] == [
        ("node-x", "gpu-system"),
        ("node-y", "gpu-system"),
    ]
    assert pods[1].metadata.name.startswith(f"{ensemble_name(CLIQUE_A)}-1-")
    assert pods[0].metadata.annotations[ANNOTATION_CLIQUE] == CLIQUE_A
    assert pods[0].spec.volumes[0].config_map.name == ensemble_name(CLIQUE_A)
    assert pods[0].spec.containers[0].command == ["python", "-m", "pkg.backends.simulated.imex_daemon"]
    probe = POD.encode(pods[0])["spec"]["containers"][0]["readinessProbe"]
    assert probe["exec"]["command"][-1].endswith(
        "nvidia-imex-ctl -c /etc/nvidia-imex/config.cfg -q | grep -qx READY"
    )
    env = {e.name: e for e in pods[1].spec.containers[0].env}
    assert env["IMEX_NODE_NAME"].value == "imex-1"  # the stand-in and the wrapper know who they are
    assert env["POD_IP"].value_from.field_ref.field_path == "status.podIP"


def test_current_pods_stay_and_a_membership_change_recreates_them(
    api: RecordingEnsembleApi, state: StateOf
) -> None:
    PodsHandler(api=api).handle(state(members={"node-x": 0, "node-y": 1}))
    x, y = api.made("create_pod")
    PodsHandler(api=api).handle(state(members={"node-x": 0, "node-y": 1}, pods=(x, y)))
    assert len(api.made("create_pod")) == 2
    assert api.made("delete_pod") == []
    PodsHandler(api=api).handle(state(members={"node-x": 0}, pods=(x, y)))
    assert api.made("delete_pod") == [x, y]  # y left; x's peers changed
    [new_x] = api.made("create_pod")[2:]
    assert new_x.spec.node_name == "node-x"
    assert new_x.metadata.labels[LABEL_NODES_HASH] != x.metadata.labels[LABEL_NODES_HASH]
    assert new_x.metadata.name != x.metadata.name  # created beside the terminating one
