"""The removal step: a clique without domains loses its ensemble; with one, nothing is removed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta, V1Pod
from testutil.compute_domains import RecordingEnsembleApi

from pkg.framework.reconcile import StopHandlerChain
from pkg.gpucontroller.imexensemble.internal.handler.removal import RemovalHandler
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState

StateOf = Callable[..., EnsembleState]
POD = V1Pod(metadata=V1ObjectMeta(name="imex-0", uid="p"))
CONFIG_MAP = V1ConfigMap(metadata=V1ObjectMeta(name="imex", uid="c"))


def test_the_last_domain_gone_removes_pods_and_config_map(api: RecordingEnsembleApi, state: StateOf) -> None:
    with pytest.raises(StopHandlerChain):
        RemovalHandler(api=api).handle(state(domains=(), pods=(POD,), config_map=CONFIG_MAP))
    assert api.made("delete_pod") == [POD]
    assert api.made("delete_config_map") == [CONFIG_MAP]


def test_a_pinned_domain_keeps_the_ensemble(api: RecordingEnsembleApi, state: StateOf) -> None:
    assert RemovalHandler(api=api).handle(state(pods=(POD,), config_map=CONFIG_MAP)) is None
    assert api.calls == []
