"""The publisher picks the slice layout from the API server's version once, on the first publish."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1OwnerReference
from pytest_mock import MockerFixture

from pkg.dra.model.slices import Layout, UnsupportedServerError
from pkg.dra.publisher import PublishResult, SliceReader
from pkg.framework.client import KubeClient
from pkg.gpuhandler.publishing.layout import ServerLayoutPublisher

OWNER = V1OwnerReference(api_version="v1", kind="Node", name="n1", uid="u", controller=True)


def publisher(mocker: MockerFixture, minor: str) -> tuple[ServerLayoutPublisher, Any, Any, Any]:
    kube = mocker.create_autospec(KubeClient, instance=True)
    kube.raw.return_value = {"major": "1", "minor": minor}
    reader = mocker.create_autospec(SliceReader, instance=True)
    inner = mocker.patch("pkg.gpuhandler.publishing.layout.SlicePublisher", autospec=True)
    inner.return_value.publish.return_value = PublishResult(generation=3)
    return ServerLayoutPublisher(kube=kube, reader=reader), kube, reader, inner


@pytest.mark.parametrize(("minor", "layout"), [("34", Layout.INLINE), ("35+", Layout.SEPARATE)])
def test_the_server_version_is_read_once_and_picks_the_layout(
    mocker: MockerFixture, minor: str, layout: Layout
) -> None:
    outer, kube, reader, inner = publisher(mocker, minor)

    outer.publish("n1", [])
    outer.publish("n1", [])

    kube.raw.assert_called_once_with("GET", "/version")
    inner.assert_called_once_with(kube=kube, reader=reader, layout=layout)


def test_publish_hands_everything_to_the_layout_publisher(mocker: MockerFixture) -> None:
    outer, _, _, inner = publisher(mocker, "35")

    result = outer.publish("n1", [], owner=OWNER, in_use={"gpu-0"})

    assert result == PublishResult(generation=3)
    inner.return_value.publish.assert_called_once_with("n1", [], owner=OWNER, in_use={"gpu-0"}, channels=())


def test_a_server_too_old_fails_the_publish_and_is_asked_again_next_time(mocker: MockerFixture) -> None:
    outer, kube, _, inner = publisher(mocker, "33")

    for _ in range(2):
        with pytest.raises(UnsupportedServerError):
            outer.publish("n1", [])

    assert kube.raw.call_count == 2
    inner.assert_not_called()
