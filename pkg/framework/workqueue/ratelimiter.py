"""Rate limiters: how long an item waits before it is retried (client-go's ``workqueue`` limiters).

A limiter answers one question, :meth:`RateLimiter.when`: "this item failed (again); after how many
seconds may it be retried?" Asking *is* the failure: every call counts one requeue, and
:meth:`RateLimiter.forget` clears the item's history once it succeeds, so the next failure starts
from the smallest delay again.

Two limiters cover two different dangers, and the controller default (:func:`default_controller_rate_limiter`,
client-go's ``DefaultTypedControllerRateLimiter``) takes the larger of their answers:

* :class:`ItemExponentialFailureRateLimiter` protects the API server from *one* broken object:
  5 ms, 10 ms, 20 ms... capped at 1000 s, per item.
* :class:`BucketRateLimiter` protects it from *many* objects failing at once: a token bucket of
  ``burst`` tokens refilled at ``qps`` per second across all items. It never refuses; it reserves
  the next free token and answers how long until that token exists, so retries are spread out
  at ``qps`` once the burst is spent.

All limiters are thread-safe: each guards its state with its own lock, and no call blocks.
Clocks are injectable (``now``, a monotonic seconds function) so tests never sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)

# Past 2**62 failures' worth of doubling any sane base exceeds any sane cap; stop doubling there
# instead of letting a float overflow.
_MAX_EXPONENT = 62


class RateLimiter(Protocol[T_contra]):
    """Answers how long an item waits before its next retry."""

    def when(self, item: T_contra) -> float:
        """Records one more failure of ``item``; returns the delay in seconds before retrying it."""
        ...

    def forget(self, item: T_contra) -> None:
        """Clears ``item``'s failure history (it succeeded, or was dropped)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many failures of ``item`` were recorded since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """``base * 2**failures`` per item, capped at ``max_delay``."""

    def __init__(self, *, base: float = 0.005, max_delay: float = 1000.0) -> None:
        if base <= 0 or max_delay < base:
            raise ValueError(f"need 0 < base <= max_delay, got base={base} max_delay={max_delay}")
        self._base = base
        self._max_delay = max_delay
        self._failures: dict[T, int] = {}
        self._lock = threading.Lock()

    def when(self, item: T) -> float:
        with self._lock:
            exponent = self._failures.get(item, 0)
            self._failures[item] = exponent + 1
        if exponent > _MAX_EXPONENT:
            return self._max_delay
        return min(self._max_delay, self._base * 2.0**exponent)

    def forget(self, item: T) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class BucketRateLimiter:
    """A token bucket shared by all items: ``burst`` retries at once, then ``qps`` per second.

    It keeps no per-item state, so :meth:`forget` does nothing and :meth:`num_requeues` is 0.
    """

    def __init__(self, *, qps: float = 10.0, burst: int = 100, now: Callable[[], float] = time.monotonic):
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self._qps = qps
        self._burst = float(burst)
        self._now = now
        self._tokens = float(burst)
        self._last = now()
        self._lock = threading.Lock()

    def when(self, item: object) -> float:
        with self._lock:
            now = self._now()
            # Refill for the time elapsed, but never above the burst: an idle bucket is merely full.
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
            self._last = now
            # Reserve a token even when none is left: the debt is what later callers wait behind.
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def forget(self, item: object) -> None:
        return None

    def num_requeues(self, item: object) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """Asks every limiter (each records the failure) and answers the longest delay."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: T) -> float:
        # A list, not a generator: every limiter must record the failure, not just the first ones.
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: T) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter() -> MaxOfRateLimiter[T]:
    """Per-item exponential backoff (5 ms .. 1000 s) bounded by an overall 10 qps, burst 100 bucket."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter[T](base=0.005, max_delay=1000.0),
        BucketRateLimiter(qps=10.0, burst=100),
    )


__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]
