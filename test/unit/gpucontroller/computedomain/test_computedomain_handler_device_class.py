"""The device-class step: the channel DeviceClass applied when missing or changed, else left."""

from __future__ import annotations

from collections.abc import Callable

from testutil.compute_domains import RecordingApi

from api.gpu.v1alpha1 import ComputeDomain
from pkg.gpucontroller.computedomain.internal.handler.device_class import DeviceClassHandler
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.render import channel_device_class

StateOf = Callable[..., ComputeDomainState]


def test_a_missing_class_is_applied_with_the_channel_selector(
    api: RecordingApi, domain: Callable[..., ComputeDomain], state: StateOf
) -> None:
    DeviceClassHandler(api=api).handle(state(domain()))
    [applied] = api.made("apply_device_class")
    assert applied.metadata.name == "imex-channel.gpu.deckhouse.io"
    assert applied.spec.selectors[0].cel.expression == (
        'device.driver == "gpu.deckhouse.io" && '
        'device.attributes["gpu.deckhouse.io"].deviceType == "ImexChannel"'
    )


def test_an_unchanged_class_is_not_applied_and_an_edited_one_is_put_back(
    api: RecordingApi, domain: Callable[..., ComputeDomain], state: StateOf
) -> None:
    DeviceClassHandler(api=api).handle(state(domain(), device_class=channel_device_class()))
    assert api.calls == []
    edited = channel_device_class()
    assert edited.spec is not None
    edited.spec.selectors = []
    DeviceClassHandler(api=api).handle(state(domain(), device_class=edited))
    assert len(api.made("apply_device_class")) == 1
