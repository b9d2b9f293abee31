"""The members step: indexes read back from members.json, stable, lowest free for a newcomer."""

from __future__ import annotations

import json
from collections.abc import Callable

from kubernetes.client import V1ConfigMap, V1ObjectMeta

from pkg.gpucontroller.imexensemble.internal.handler.members import MembersHandler
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState
from pkg.gpucontroller.imexensemble.render import MEMBERS_KEY

StateOf = Callable[..., EnsembleState]


def stored(members: dict[str, int]) -> V1ConfigMap:
    return V1ConfigMap(metadata=V1ObjectMeta(name="imex"), data={MEMBERS_KEY: json.dumps(members)})


def test_new_nodes_take_the_lowest_free_indexes_in_name_order(state: StateOf) -> None:
    fresh = state(nodes=frozenset({"node-b", "node-a"}))
    MembersHandler().handle(fresh)
    assert fresh.members == {"node-a": 0, "node-b": 1}


def test_stored_indexes_are_kept_and_a_leaver_frees_its_own(state: StateOf) -> None:
    later = state(nodes=frozenset({"node-b", "node-c"}), config_map=stored({"node-a": 0, "node-b": 1}))
    MembersHandler().handle(later)
    assert later.members == {"node-c": 0, "node-b": 1}


def test_a_broken_members_json_is_handed_out_again(state: StateOf) -> None:
    broken = V1ConfigMap(metadata=V1ObjectMeta(name="imex"), data={MEMBERS_KEY: "{not json"})
    again = state(nodes=frozenset({"node-b"}), config_map=broken)
    MembersHandler().handle(again)
    assert again.members == {"node-b": 0}
