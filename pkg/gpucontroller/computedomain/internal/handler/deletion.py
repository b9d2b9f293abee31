"""Step 1, deletion: a deleted domain keeps its finalizer until none of its claims is allocated.

A claim still allocated means a Pod may still run with the channel on some node; giving the
channel to the next domain under it would let a new job import its memory, and while the domain
exists its clique keeps its IMEX ensemble. Once the claims are gone or deallocated, the channel's
ledger entry is released and the finalizer dropped; the template goes by garbage collection (the
domain owns it), and the ensemble controller removes the clique's daemons if no other domain is
pinned to it.
"""

from __future__ import annotations

from api.gpu.v1alpha1 import COMPUTE_DOMAIN_FINALIZER
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.ledger import encode_ledger, parse_ledger, release_channel
from pkg.gpucontroller.computedomain.internal.membership import allocated_channel_config
from pkg.gpucontroller.computedomain.internal.meta import meta
from pkg.gpucontroller.computedomain.internal.service import ComputeDomainApi
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import REASON_DELETING, report


class DeletionHandler:
    name = "deletion"

    def __init__(self, *, api: ComputeDomainApi) -> None:
        self._api = api

    def handle(self, state: ComputeDomainState) -> Result | None:
        metadata = state.resource.changed().metadata
        if metadata.deletion_timestamp is None:
            return None
        if COMPUTE_DOMAIN_FINALIZER not in (metadata.finalizers or []):
            raise StopHandlerChain(reason="deleted, not ours to finalize")
        uid = str(metadata.uid)
        holding = sorted(
            str(meta(c).name)
            for c in state.claims
            if (config := allocated_channel_config(c)) is not None and config.domain_uid == uid
        )
        if holding:
            report(
                state,
                ready=False,
                reason=REASON_DELETING,
                message=f"deleting: waiting for claims to be deallocated: {', '.join(holding)}",
            )
            raise StopHandlerChain(reason="claims still allocated")
        ledger = self._api.read_ledger()
        if ledger is not None:
            entries = parse_ledger(ledger.data)
            remaining = release_channel(entries, uid)
            if remaining != entries:
                self._api.write_ledger(ledger, encode_ledger(remaining))
        metadata.finalizers = [f for f in metadata.finalizers or [] if f != COMPUTE_DOMAIN_FINALIZER]
        raise StopHandlerChain(reason="finalized")
