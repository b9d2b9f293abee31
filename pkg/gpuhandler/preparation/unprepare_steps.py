"""Unprepare's steps: the record read, the claim released in the one release order, forgotten.

=========================== ===============================================================
step                        what it does
=========================== ===============================================================
``load-checkpoint``         the node's record, read fresh (as Prepare's first step)
``nothing-to-unprepare``    a claim this node never prepared (or already forgot) only loses a
                            leftover CDI spec, if any, and the pipeline stops: the kubelet calls
                            Unprepare again after any doubt
``release-claim``           each device by its kind, then the CDI spec (:mod:`.release`)
``forget-claim``            the record removed, durably: only now is the claim's state gone, so a
                            crash anywhere before leaves a record that the kubelet's retry (or
                            start-up) releases again
=========================== ===============================================================

Unprepare rolls nothing back, so every undo here does nothing: undoing a release would re-create
what the workload no longer uses. A failure fails the call; the kubelet retries with backoff.
"""

from __future__ import annotations

from pkg.framework.steptaker import StepOutcome
from pkg.gpuhandler.preparation.attempt import ClaimAttempt
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import CheckpointStore
from pkg.gpuhandler.preparation.prepare_steps import forget, loaded
from pkg.gpuhandler.preparation.release import ClaimRelease


class NothingToUnprepare:
    """A claim without a record here is done once its leftover CDI spec, if any, is gone."""

    name = "nothing-to-unprepare"

    def __init__(self, cdi: CdiSpecs) -> None:
        self._cdi = cdi

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        attempt.record = loaded(attempt).claims.get(attempt.claim.uid)
        if attempt.record is not None:
            return StepOutcome.NOT_APPLICABLE
        self._cdi.remove(attempt.claim.uid)
        attempt.note = "not prepared on this node"
        return StepOutcome.STOP

    def undo(self, attempt: ClaimAttempt) -> None:
        """A spec no record owns is not put back."""


class ReleaseClaim:
    """The claim's devices, then its CDI spec, given back in the one release order."""

    name = "release-claim"

    def __init__(self, release: ClaimRelease) -> None:
        self._release = release

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        assert attempt.record is not None, "nothing-to-unprepare runs before"
        attempt.changed_cards |= self._release.release(attempt.record, loaded(attempt))
        return StepOutcome.DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        """Nothing is re-created: the kubelet's retry releases what is left."""


class ForgetClaim:
    """The claim's record removed, durably, once nothing of it is left on the node."""

    name = "forget-claim"

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        forget(self._store, loaded(attempt), attempt.claim.uid)
        return StepOutcome.DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        """A forgotten claim stays forgotten."""
