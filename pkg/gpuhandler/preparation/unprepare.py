"""Unprepare, one claim: the record read, the claim released in the one release order, forgotten.

1. ``load-checkpoint`` (the same step as Prepare's);
2. ``nothing-to-unprepare`` — a claim this node never prepared (or already forgot) only loses a
   leftover CDI spec, if any (Stop): the kubelet calls Unprepare again after any doubt;
3. ``release-claim`` — each device by its kind, then the CDI spec (:mod:`.release`);
4. ``forget-claim`` — the record removed, durably: only now is the claim's state gone, so a crash
   anywhere before leaves a record that the kubelet's retry (or start-up) releases again.

Unprepare rolls nothing back: undoing a release would re-create what the workload no longer
uses. A failing step fails the call; the kubelet retries with backoff.
"""

from __future__ import annotations

from pkg.framework.steptaker import Continue, StepOutcome, Stop
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.context import StepContext
from pkg.gpuhandler.preparation.release import ClaimRelease
from pkg.gpuhandler.preparation.services import CheckpointStore


class NothingToUnprepare:
    name = "nothing-to-unprepare"

    def __init__(self, cdi: CdiSpecs) -> None:
        self._cdi = cdi

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        if ctx.claim.uid in checkpoint.claims:
            return Continue()
        self._cdi.remove(ctx.claim.uid)
        return Stop("not prepared on this node")


class ReleaseClaim:
    name = "release-claim"

    def __init__(self, release: ClaimRelease) -> None:
        self._release = release

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        ctx.changed_cards |= self._release.release(checkpoint.claims[ctx.claim.uid], checkpoint)
        return Continue()


class ForgetClaim:
    name = "forget-claim"

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        checkpoint.claims.pop(ctx.claim.uid, None)
        self._store.save(checkpoint)
        return Continue()
