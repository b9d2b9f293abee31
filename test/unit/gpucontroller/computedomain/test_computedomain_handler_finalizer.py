"""The finalizer step: stored once, others' finalizers kept."""

from __future__ import annotations

from collections.abc import Callable

from api.gpu.v1alpha1 import COMPUTE_DOMAIN_FINALIZER, ComputeDomain
from pkg.gpucontroller.computedomain.internal.handler.finalizer import FinalizerHandler
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState


def test_the_finalizer_is_added_beside_others_once(
    domain: Callable[..., ComputeDomain], state: Callable[..., ComputeDomainState]
) -> None:
    made = domain()
    made.metadata.finalizers = ["example.com/other"]
    pass_state = state(made)
    FinalizerHandler().handle(pass_state)
    FinalizerHandler().handle(pass_state)
    assert pass_state.resource.changed().metadata.finalizers == [
        "example.com/other",
        COMPUTE_DOMAIN_FINALIZER,
    ]
