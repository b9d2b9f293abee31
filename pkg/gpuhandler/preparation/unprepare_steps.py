"""The steps of Unprepare, in pipeline order: the reverse of Prepare, each idempotent.

1. ``load-checkpoint`` (shared with Prepare);
2. ``nothing-to-unprepare`` — a claim this node never prepared (or already forgot) only loses a
   leftover CDI spec, if any (Stop): the kubelet calls Unprepare again after any doubt;
3. ``release-sharing`` — what its shares needed of their cards and no other share needs: the
   time slice back to ``Default``, the MPS daemon stopped (:mod:`sharing`);
4. ``release-devices`` — its MIG devices destroyed (by placement); whole cards stay as they are;
   ``release-vfio`` — functions bound to ``vfio-pci`` given back to their original drivers, and
   ``remove-vm-metadata`` (:mod:`vfio_steps`);
5. ``remove-cdi-spec``;
6. ``forget-claim`` — the record removed, durably: only now is the claim's state gone, so a crash
   anywhere before leaves a record that the kubelet's retry (or start-up) completes.

Unprepare rolls nothing back: undoing a release would re-create what the workload no longer
uses. A failing step fails the call; the kubelet retries with backoff.
"""

from __future__ import annotations

from pkg.backends.preparation import CardPreparer
from pkg.framework.steptaker import Continue, StepOutcome, Stop
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.context import StepContext
from pkg.gpuhandler.preparation.release import release_devices
from pkg.gpuhandler.preparation.services import CheckpointStore
from pkg.gpuhandler.preparation.sharing import CardSharing


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


class ReleaseSharing:
    name = "release-sharing"

    def __init__(self, sharing: CardSharing) -> None:
        self._sharing = sharing

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        self._sharing.release(checkpoint.claims[ctx.claim.uid], remaining=checkpoint.claims.values())
        return Continue()


class ReleaseDevices:
    name = "release-devices"

    def __init__(self, preparer: CardPreparer) -> None:
        self._preparer = preparer

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        ctx.changed_cards.update(release_devices(checkpoint.claims[ctx.claim.uid], self._preparer))
        return Continue()


class RemoveCdiSpec:
    name = "remove-cdi-spec"

    def __init__(self, cdi: CdiSpecs) -> None:
        self._cdi = cdi

    def take(self, ctx: StepContext) -> StepOutcome:
        self._cdi.remove(ctx.claim.uid)
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
