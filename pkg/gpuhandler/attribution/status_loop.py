"""The status loop: the one thread that writes the status book's pending claims.

One thread, so the writes of one claim are serialised whatever fed them (a Prepare on a gRPC
thread, a verdict change, the attribution) and a claim's entries on the server are always those of
one moment of the book. It wakes when the book changes (:attr:`~.status_book.DeviceStatusBook.wake`)
and at least every ``period``, so a claim backing off is retried when its time comes. On start it
takes the claims the checkpoint says are prepared (``seed``): a restarted gpu-handler writes their
entries again, and the next usage joins them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pkg.gpuhandler.attribution.claim_status import ClaimStatusWriter, Outcome
from pkg.gpuhandler.attribution.status_book import DeviceStatusBook

logger = logging.getLogger(__name__)


class DeviceStatusLoop:
    name = "device-status"
    needs_leader_election = False  # one handler per node, writing its own devices' entries

    def __init__(
        self,
        *,
        book: DeviceStatusBook,
        writer: ClaimStatusWriter,
        seed: Callable[[], None] = lambda: None,
        period: float = 5.0,
    ) -> None:
        self._book = book
        self._writer = writer
        self._seed = seed
        self._period = period

    def run(self, stop: threading.Event) -> None:
        try:
            self._seed()
        except Exception:
            logger.exception("the prepared claims' device status is not restored from the checkpoint")
        while not stop.is_set():
            self._book.wake.wait(self._period)
            self._book.wake.clear()
            if stop.is_set():
                return
            try:
                self.step()
            except Exception:
                logger.exception("writing the claims' device status failed")

    def step(self) -> None:
        """Writes every pending claim once (those backing off wait for their time)."""
        for claim in self._book.pending():
            result = self._writer.write(claim)
            if result.outcome is Outcome.WRITTEN or result.outcome is Outcome.DISABLED:
                self._book.settle(claim.uid, claim.generation)
            elif result.outcome is Outcome.GONE:
                self._book.forget(claim.uid)
                self._writer.forget(claim.uid)
            elif result.outcome is Outcome.RESOLVED and claim.failure is not None:
                reason, message = claim.failure
                self._book.failed(
                    namespace=claim.namespace,
                    name=claim.name,
                    uid=claim.uid,
                    devices=result.devices,
                    reason=reason,
                    message=message,
                )
