"""The config-map step: the clique's files, members.json and the live daemons' addresses."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from kubernetes.client import V1ObjectMeta, V1Pod, V1PodSpec, V1PodStatus
from testutil.compute_domains import CLIQUE_A, RecordingEnsembleApi

from pkg.framework.reconcile.handler import StopHandlerChain
from pkg.gpucontroller.imexensemble.internal.handler.config_map import ConfigMapHandler
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState
from pkg.gpucontroller.imexensemble.render import (
    ANNOTATION_CLIQUE,
    LABEL_NODES_HASH,
    MEMBERS_KEY,
    ensemble_name,
    members_hash,
)
from pkg.gpucontroller.imexensemble.settings import DaemonSettings

StateOf = Callable[..., EnsembleState]
MEMBERS = {"node-x": 0, "node-y": 1}


def daemon(node: str, ip: str, hashed: str) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name=f"d-{node}", labels={LABEL_NODES_HASH: hashed}),
        spec=V1PodSpec(node_name=node, containers=[]),
        status=V1PodStatus(pod_ip=ip),
    )


def test_the_files_list_every_member_and_the_current_daemons_addresses(
    api: RecordingEnsembleApi, state: StateOf
) -> None:
    current = members_hash(MEMBERS, 50000)
    pods = (daemon("node-x", "10.0.0.1", current), daemon("node-y", "10.0.0.9", "an-old-hash"))
    ConfigMapHandler(api=api).handle(state(members=dict(MEMBERS), pods=pods))
    [written] = api.made("apply_config_map")
    assert written.metadata.name == ensemble_name(CLIQUE_A)
    assert written.metadata.annotations[ANNOTATION_CLIQUE] == CLIQUE_A
    assert written.data["nodes_config.cfg"].split() == ["imex-0", "imex-1"]
    assert written.data["hosts"].split() == ["10.0.0.1", "imex-0"]  # the leftover's address is not listed
    assert json.loads(written.data[MEMBERS_KEY]) == MEMBERS


def test_an_unchanged_config_map_is_not_written_again(api: RecordingEnsembleApi, state: StateOf) -> None:
    ConfigMapHandler(api=api).handle(state(members=dict(MEMBERS)))
    [written] = api.made("apply_config_map")
    ConfigMapHandler(api=api).handle(state(members=dict(MEMBERS), config_map=written))
    assert len(api.made("apply_config_map")) == 1


def test_without_daemon_settings_the_pass_stops_naming_the_clique(
    api: RecordingEnsembleApi, state: StateOf
) -> None:
    off = state(members=dict(MEMBERS), daemons=DaemonSettings(None, problem="computeDomains is not enabled"))
    # A state, not a failure: the pass ends quietly and the configuration's change wakes it.
    with pytest.raises(StopHandlerChain, match=f"{CLIQUE_A}: computeDomains is not enabled"):
        ConfigMapHandler(api=api).handle(off)
    assert api.calls == []
