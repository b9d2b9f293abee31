"""The node-labels controller's one write: a merge patch that names only the gate labels."""

from __future__ import annotations

import pytest
from pytest_mock import MockerFixture

from pkg.framework.client import KubeClient, NotFoundError, PatchType
from pkg.framework.client.builtin_kinds import NODE
from pkg.gpucontroller.nodelabels.service import KubeNodeLabelWriter


def test_patch_labels_sets_and_removes_exactly_the_given_keys(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)

    KubeNodeLabelWriter(client).patch_labels("n1", {"gpu.deckhouse.io/a": "true", "gpu.deckhouse.io/b": None})

    client.patch.assert_called_once_with(
        NODE,
        "n1",
        {"metadata": {"labels": {"gpu.deckhouse.io/a": "true", "gpu.deckhouse.io/b": None}}},
        patch_type=PatchType.MERGE,
    )


def test_a_missing_node_is_the_callers_to_handle(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    client.patch.side_effect = NotFoundError(status=404, reason="NotFound", message='nodes "n1" not found')

    with pytest.raises(NotFoundError):
        KubeNodeLabelWriter(client).patch_labels("n1", {"gpu.deckhouse.io/a": "true"})
