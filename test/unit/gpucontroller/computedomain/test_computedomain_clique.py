"""The clique offered by the most nodes' channel devices wins; ties go to the smallest value."""

from __future__ import annotations

from kubernetes.client import V1ResourceSlice

from pkg.framework.client.builtin_kinds import RESOURCE_SLICE
from pkg.gpucontroller.computedomain.internal.clique import choose_clique, offered_cliques

A, B = "7f1d2e3c-aaaa-4bbb-8ccc-000000000001.1", "7f1d2e3c-aaaa-4bbb-8ccc-000000000001.2"


def slice_of(node: str, clique: str, device_type: str = "ImexChannel") -> V1ResourceSlice:
    attributes = {
        "gpu.deckhouse.io/deviceType": {"string": device_type},
        "gpu.deckhouse.io/nvlinkDomain": {"string": clique},
    }
    return RESOURCE_SLICE.decode(
        {
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": "gpu.deckhouse.io",
                "nodeName": node,
                "pool": {"name": f"gpus/{node}", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "imex-channel-1", "attributes": attributes}],
            },
        }
    )


def test_the_clique_of_most_nodes_is_chosen() -> None:
    offered = offered_cliques([slice_of("n1", B), slice_of("n2", A), slice_of("n3", A)])
    assert offered == {A: {"n2", "n3"}, B: {"n1"}}
    assert choose_clique(offered) == A


def test_only_channel_devices_count_and_ties_go_to_the_smallest() -> None:
    offered = offered_cliques(
        [slice_of("n1", B), slice_of("n2", A), slice_of("n3", A, device_type="Physical")]
    )
    assert choose_clique(offered) == A
    assert choose_clique({}) is None
