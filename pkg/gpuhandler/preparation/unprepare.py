"""Unprepare, one claim: the record read, the claim released in the one release order, forgotten.

:meth:`ClaimUnpreparer.unprepare` runs, under the node lock (:mod:`.driver` takes it):

1. ``load-checkpoint`` — the node's record, read fresh (as Prepare's first phase);
2. ``nothing-to-unprepare`` — a claim this node never prepared (or already forgot) only loses a
   leftover CDI spec, if any, and nothing else happens: the kubelet calls Unprepare again after
   any doubt;
3. ``release-claim`` — each device by its kind, then the CDI spec (:mod:`.release`);
4. ``forget-claim`` — the record removed, durably: only now is the claim's state gone, so a crash
   anywhere before leaves a record that the kubelet's retry (or start-up) releases again.

The phases' names are the crash points (:data:`~.crash.UNPREPARE_POINTS`). Unprepare rolls
nothing back: undoing a release would re-create what the workload no longer uses. A failure fails
the call; the kubelet retries with backoff.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation import crash
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import CheckpointStore
from pkg.gpuhandler.preparation.claim_ref import validate_claim_ref
from pkg.gpuhandler.preparation.prepare import Attempt, forget
from pkg.gpuhandler.preparation.release import ClaimRelease


class ClaimUnpreparer:
    def __init__(
        self,
        *,
        store: CheckpointStore,
        release: ClaimRelease,
        cdi: CdiSpecs,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self._store = store
        self._release = release
        self._cdi = cdi
        self._crash_at = crash.crash_at("unprepare", crash.UNPREPARE_POINTS, environ)

    def unprepare(self, claim: ClaimRef) -> Attempt:
        """Unprepares ``claim`` (call with the node lock held); never raises for a failure."""
        attempt = Attempt("unprepare", self._crash_at)
        try:
            validate_claim_ref(claim)  # InvalidClaim before its UID reaches a path (claim_ref)
            with attempt.phase("load-checkpoint"):
                attempt.checkpoint = checkpoint = self._store.load()

            with attempt.phase("nothing-to-unprepare"):
                record = checkpoint.claims.get(claim.uid)
                if record is None:
                    self._cdi.remove(claim.uid)
                    attempt.note = "not prepared on this node"
                    return attempt

            with attempt.phase("release-claim"):
                attempt.changed_cards |= self._release.release(record, checkpoint)

            with attempt.phase("forget-claim"):
                forget(self._store, checkpoint, claim.uid)
        except Exception as exc:
            attempt.error = exc
        return attempt
