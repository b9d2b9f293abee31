"""A domain's own events: creates and deletes, and an update when its spec (generation) or deletion
mark changed; its status writes, the controller's own, do not wake it."""

from __future__ import annotations

from api.gpu.v1alpha1 import ComputeDomain
from pkg.framework.controller.predicate import Funcs, Predicate


def spec_or_deletion_changed(old: ComputeDomain, new: ComputeDomain) -> bool:
    return (old.metadata.generation, old.metadata.deletion_timestamp) != (
        new.metadata.generation,
        new.metadata.deletion_timestamp,
    )


def compute_domain_events() -> Predicate:
    return Funcs(update=spec_or_deletion_changed)
