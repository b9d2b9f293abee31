"""Lease-based leader election, after client-go's ``tools/leaderelection``.

Replicas compete for one ``coordination.k8s.io/v1`` Lease; its holder runs the controllers. Writes
are PUTs carrying the resourceVersion that was read, so of two candidates racing for a free lease
the API server answers one with a conflict, and that one tries again next round.

Why expiry is judged by *observation time* and not by the lease's ``renewTime``: ``renewTime`` is
written with the holder's wall clock, and the two machines' clocks may disagree by more than a lease
duration. So, like client-go, a candidate notes on its own monotonic clock when it last saw the
lease *change*, and considers the lease expired only after ``leaseDurationSeconds`` have passed on
that clock with no change. Skew then cannot make a healthy holder look dead. The price: a candidate
that starts while a crashed holder's lease is already stale still waits one full lease duration.

The holder renews every ``retry_period`` and stops leading when it has not renewed for
``renew_deadline`` (< ``lease_duration``), before any candidate may take over. So requests must time
out well within ``renew_deadline``: give the lease client a request timeout of a few seconds.

Threads: :meth:`LeaderElector.run` is the elector loop; ``on_new_leader`` runs on it (keep it quick),
``on_started_leading`` on its own thread with an event set when leading ends, ``on_stopped_leading``
on the loop once leading ended. With ``release_on_cancel`` the lease is handed back on shutdown once
the leading work returned, so a successor takes over at once, not after a lease duration.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from datetime import datetime

from kubernetes.client import V1Lease, V1LeaseSpec, V1ObjectMeta

from pkg.framework.client import AlreadyExistsError, ConflictError, NotFoundError
from pkg.framework.client.builtin_kinds import LEASE
from pkg.framework.client.times import micro_time
from pkg.framework.clock import Clock, SystemClock
from pkg.framework.manager.leaderelection_config import (
    JITTER_FACTOR,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaseClient,
    Sleep,
    default_identity,
)
from pkg.framework.metrics.leader import LeaderMetrics
from pkg.framework.metrics.provider import MetricsProvider

logger = logging.getLogger(__name__)

__all__ = [
    "JITTER_FACTOR",
    "Clock",
    "LeaderCallbacks",
    "LeaderElectionConfig",
    "LeaderElector",
    "LeaseClient",
    "SystemClock",
    "default_identity",
    "micro_time",
]


class LeaderElector:
    """Competes for one Lease; a :class:`~pkg.framework.manager.runnable.Runnable` run by the manager."""

    needs_leader_election = False

    def __init__(
        self,
        *,
        config: LeaderElectionConfig,
        client: LeaseClient,
        callbacks: LeaderCallbacks,
        clock: Clock | None = None,
        sleep: Sleep = threading.Event.wait,
        rng: random.Random | None = None,
        metrics: MetricsProvider | None = None,
    ):
        self.name = f"leader-election/{config.lease_namespace}/{config.lease_name}"
        self._config = config
        self._client = client
        self._callbacks = callbacks
        self._clock = clock or SystemClock()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._metrics = LeaderMetrics(provider=metrics or MetricsProvider())
        self._lease: V1Lease | None = None  # last object read or written: its resourceVersion
        self._observed = V1LeaseSpec()
        self._observed_at = 0.0
        self._reported_leader = ""
        self._ctx = {"lease": self.name, "identity": config.identity}  # log context

    def leader(self) -> str:
        """The holder as last observed ("" when unknown or released)."""
        return self._observed.holder_identity or ""

    def is_leader(self) -> bool:
        return self.leader() == self._config.identity

    def run(self, stop: threading.Event) -> None:
        """Acquires, leads until ``stop`` or a lost renewal, then (maybe) releases; returns."""
        if not self._acquire(stop):
            return
        leading = threading.Event()
        self._metrics.set_leading(self._config.lease_name, leading=True)
        worker = threading.Thread(target=self._lead, args=(leading,), name=self.name, daemon=True)
        worker.start()
        try:
            self._renew(stop)
        finally:
            leading.set()
            self._metrics.set_leading(self._config.lease_name, leading=False)
            if stop.is_set() and self._config.release_on_cancel:
                # The successor must not start while our leading work still runs.
                worker.join(timeout=self._config.renew_deadline)
                if not worker.is_alive():
                    self.release()
                else:
                    logger.warning("leading work still running: lease kept", extra=self._ctx)
            self._callbacks.on_stopped_leading()

    def try_acquire_or_renew(self, *, deadline: float | None = None) -> bool:
        """One round: renew our lease, or take a free or expired one. True when we hold it now.

        A round may take up to three requests; ``deadline`` (monotonic) stops it between them, so
        a leader whose renewals hang gives up by its renew deadline instead of a whole round later,
        when a successor may already lead (client-go bounds the renewal the same way).
        """
        wall = micro_time(self._clock.now())
        now = self._clock.monotonic()
        if self.is_leader() and self._lease is not None and self._valid(now):
            spec = self._observed.model_copy(update={"renew_time": wall})
            if self._write(self._lease.model_copy(update={"spec": spec}), now):
                return True
            # Fall through: a fresh read tells whether someone else took the lease meanwhile.
        if self._past(deadline):
            return False
        try:
            current = self._client.get(LEASE, self._config.lease_name, self._config.lease_namespace)
        except NotFoundError:
            return self._create(wall, now)
        except Exception as exc:  # transport errors are many kinds; any of them means "not now"
            logger.warning("reading the lease failed: %s", exc, extra=self._ctx)
            return False
        self._lease = current
        if (current.spec or V1LeaseSpec()) != self._observed:
            self._observe(current, now)
        if self.leader() and self._valid(now) and not self.is_leader():
            return False
        transitions = self._observed.lease_transitions or 0
        if self.is_leader():
            acquired = self._observed.acquire_time or wall
            spec = self._spec(acquire=acquired, renew=wall, transitions=transitions)
        else:  # taking over a free or expired lease is a transition
            spec = self._spec(acquire=wall, renew=wall, transitions=transitions + 1)
        if self._past(deadline):
            return False
        return self._write(current.model_copy(update={"spec": spec}), now)

    def _past(self, deadline: float | None) -> bool:
        return deadline is not None and self._clock.monotonic() >= deadline

    def release(self) -> bool:
        """Hands the lease back: no holder, one-second duration, so a candidate takes it at once."""
        if not self.is_leader() or self._lease is None:
            return False
        wall = micro_time(self._clock.now())
        transitions = self._observed.lease_transitions or 0
        spec = V1LeaseSpec(
            lease_duration_seconds=1, acquire_time=wall, renew_time=wall, lease_transitions=transitions
        )
        released = self._write(self._lease.model_copy(update={"spec": spec}), self._clock.monotonic())
        if released:
            logger.info("released the lease", extra=self._ctx)
        return released

    def _acquire(self, stop: threading.Event) -> bool:
        logger.info("attempting to acquire the lease", extra=self._ctx)
        while not stop.is_set():
            if self.try_acquire_or_renew():
                logger.info("acquired the lease", extra=self._ctx)
                return True
            delay = self._config.retry_period * (1 + self._rng.random() * JITTER_FACTOR)
            if self._sleep(stop, delay):
                break
        return False

    def _renew(self, stop: threading.Event) -> None:
        """Returns on ``stop``, when another holder shows up, or after ``renew_deadline`` of failures."""
        last_renewed = self._clock.monotonic()
        while not self._sleep(stop, self._config.retry_period):
            if self.try_acquire_or_renew(deadline=last_renewed + self._config.renew_deadline):
                last_renewed = self._clock.monotonic()
                continue
            failing_for = self._clock.monotonic() - last_renewed
            if not self.is_leader() or failing_for >= self._config.renew_deadline:
                extra = {**self._ctx, "holder": self.leader()}
                logger.error("lost the lease after %.1fs without renewal", failing_for, extra=extra)
                return

    def _lead(self, leading: threading.Event) -> None:
        try:
            self._callbacks.on_started_leading(leading)
        except Exception:
            logger.exception("on_started_leading failed", extra=self._ctx)

    def _spec(self, *, acquire: datetime, renew: datetime, transitions: int) -> V1LeaseSpec:
        return V1LeaseSpec(
            holder_identity=self._config.identity,
            lease_duration_seconds=math.ceil(self._config.lease_duration),
            acquire_time=acquire,
            renew_time=renew,
            lease_transitions=transitions,
        )

    def _create(self, wall: datetime, now: float) -> bool:
        meta = V1ObjectMeta(name=self._config.lease_name, namespace=self._config.lease_namespace)
        lease = V1Lease(metadata=meta, spec=self._spec(acquire=wall, renew=wall, transitions=0))
        try:
            created = self._client.create(LEASE, lease, self._config.lease_namespace)
        except AlreadyExistsError:
            return False  # another candidate created it first; the next round reads it
        except Exception as exc:
            logger.warning("creating the lease failed: %s", exc, extra=self._ctx)
            return False
        self._observe(created, now)
        return True

    def _write(self, lease: V1Lease, now: float) -> bool:
        try:
            written = self._client.update(LEASE, lease)
        except ConflictError:
            logger.debug("lease changed since it was read; retrying later", extra=self._ctx)
            return False
        except Exception as exc:
            logger.warning("updating the lease failed: %s", exc, extra=self._ctx)
            return False
        self._observe(written, now)
        return True

    def _observe(self, lease: V1Lease, now: float) -> None:
        self._lease = lease
        self._observed = lease.spec or V1LeaseSpec()
        self._observed_at = now
        holder = self.leader()
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            logger.info("new leader observed", extra={**self._ctx, "holder": holder})
            if self._callbacks.on_new_leader is not None:
                try:
                    self._callbacks.on_new_leader(holder)
                except Exception:
                    logger.exception("on_new_leader failed", extra=self._ctx)

    def _valid(self, now: float) -> bool:
        return self._observed_at + (self._observed.lease_duration_seconds or 0) > now
