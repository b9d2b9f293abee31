"""Rate limiters: per-item exponential backoff, the shared token bucket, and their maximum."""

from __future__ import annotations

import threading

import pytest

from pkg.framework.workqueue.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)


class ManualTime:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_exponential_doubles_from_base_per_item() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    assert [limiter.when("a") for _ in range(5)] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert limiter.when("b") == pytest.approx(0.005)
    assert limiter.num_requeues("a") == 5
    assert limiter.num_requeues("b") == 1


def test_exponential_is_capped_and_never_overflows() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base=0.005, max_delay=1000.0)
    delays = [limiter.when("a") for _ in range(2000)]
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655 s, still below the cap
    assert delays[18] == 1000.0
    assert delays[-1] == 1000.0


def test_forget_resets_the_backoff() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    for _ in range(4):
        limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)


def test_exponential_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="base"):
        ItemExponentialFailureRateLimiter[str](base=1.0, max_delay=0.5)


def test_exponential_counts_concurrent_failures_exactly() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()

    def fail() -> None:
        for _ in range(500):
            limiter.when("a")

    threads = [threading.Thread(target=fail) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert limiter.num_requeues("a") == 4000


def test_bucket_allows_burst_then_spaces_at_qps() -> None:
    now = ManualTime()
    limiter = BucketRateLimiter(qps=10.0, burst=3, now=now)
    assert [limiter.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    # Each further caller waits behind the ones that reserved before it.
    assert [limiter.when(i) for i in range(3, 6)] == pytest.approx([0.1, 0.2, 0.3])


def test_bucket_refills_with_time_up_to_burst() -> None:
    now = ManualTime()
    limiter = BucketRateLimiter(qps=10.0, burst=2, now=now)
    limiter.when("a")
    limiter.when("a")
    now.t += 0.1  # one token back
    assert limiter.when("a") == 0.0
    assert limiter.when("a") == pytest.approx(0.1)
    now.t += 3600  # long idle: the bucket is full, not overfull
    assert [limiter.when("a") for _ in range(3)] == pytest.approx([0.0, 0.0, 0.1])


def test_bucket_keeps_no_item_state() -> None:
    limiter = BucketRateLimiter(qps=1.0, burst=1, now=ManualTime())
    limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("b") == pytest.approx(1.0)  # forget does not return the token


def test_max_of_answers_the_longest_and_every_limiter_records() -> None:
    now = ManualTime()
    exponential = ItemExponentialFailureRateLimiter[str](base=0.01, max_delay=10.0)
    bucket = BucketRateLimiter(qps=1.0, burst=2, now=now)
    limiter = MaxOfRateLimiter(exponential, bucket)
    assert limiter.when("a") == pytest.approx(0.01)  # bucket says 0
    assert limiter.when("a") == pytest.approx(0.02)
    assert limiter.when("b") == pytest.approx(1.0)  # bucket is empty now: it wins
    assert exponential.num_requeues("a") == 2
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_default_controller_limiter_is_exponential_per_item() -> None:
    limiter: MaxOfRateLimiter[str] = default_controller_rate_limiter()
    assert [limiter.when("x") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])
