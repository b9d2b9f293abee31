"""Everything one allocation attempt works on, built once from the cluster's objects.

:class:`AllocationContext` gathers the pools reachable from the node, what other claims hold, the
counter and capacity tallies, the claim's request plans and constraint trackers, and which devices
each request alternative may select. The search (:mod:`.allocator`) mutates the tallies while it
tries devices and undoes every change on backtracking; :mod:`.explain` reads the same context
without searching. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dra.allocator.allocated import AllocatedDevices
from pkg.dra.allocator.attempt import AllocationInputs
from pkg.dra.allocator.capacity import CapacityTally, consumption
from pkg.dra.allocator.constraints import Constraint, build_constraints
from pkg.dra.allocator.counters import CounterTally
from pkg.dra.allocator.pools import Candidate, Pool, PoolCache, gather_pools
from pkg.dra.allocator.requests import (
    MAX_DEVICES_PER_CLAIM,
    Alternative,
    ClaimError,
    RequestPlan,
    claim_label,
    plan_requests,
)
from pkg.dra.allocator.selection import SelectorEvaluationError, SelectorMatcher

_MAX_MEMO_PER_POOL = 512


class PoolUnavailableError(Exception):
    """An ``All`` request met an incomplete or invalid pool: retry once the driver republishes."""


SelectorKey = tuple[tuple[str, int, str], ...]
Eligibility = tuple[list[Candidate], dict[Candidate, SelectorEvaluationError]]
"""A pool's devices whose selectors hold or fail with an error (in order), and those errors."""


def selector_key(alt: Alternative) -> SelectorKey:
    """What an alternative's device verdicts depend on: its selectors, keyed by owner too (a cached
    error names the class or claim the selector came from)."""
    return tuple((s.owner, s.index, s.compiled.expression) for s in alt.selectors)


def match(matcher: SelectorMatcher, alt: Alternative, candidates: Iterable[Candidate]) -> Eligibility:
    """The candidates whose selectors hold or fail with an error (in order), and those errors."""
    matching: list[Candidate] = []
    errors: dict[Candidate, SelectorEvaluationError] = {}
    for cand in candidates:
        try:
            if matcher.first_mismatch(alt, cand) is not None:
                continue
        except SelectorEvaluationError as failure:
            errors[cand] = failure
        matching.append(cand)
    return matching, errors


def pool_eligibility(pool: Pool, alt: Alternative, matcher: SelectorMatcher, key: SelectorKey) -> Eligibility:
    """``alt``'s eligible devices of ``pool``, memoised on the pool under ``key`` (its
    :func:`selector_key`) for as long as the pool is unchanged: every attempt and explanation whose
    selectors are the same shares one pass over the pool's devices."""
    memo = pool.eligible_memo.get(key)
    if memo is None:
        memo = match(matcher, alt, pool.candidates)
        if len(pool.eligible_memo) >= _MAX_MEMO_PER_POOL:
            pool.eligible_memo.clear()
        pool.eligible_memo[key] = memo
    return memo


class AllocationContext:
    def __init__(
        self,
        claim: ResourceV1ResourceClaim,
        inputs: AllocationInputs,
        *,
        matcher: SelectorMatcher,
        share_id: Callable[[], str] | None = None,
        pool_cache: PoolCache | None = None,
    ) -> None:
        """Raises :class:`ClaimError` when the claim cannot be allocated as written."""
        self.claim = claim
        self.node = inputs.node
        self.matcher = matcher
        self.plans: list[RequestPlan] = plan_requests(
            claim, classes=inputs.classes, env=matcher.env, namespace_labels=inputs.namespace_labels
        )
        devices = claim.spec.devices if claim.spec is not None else None
        try:
            self.constraints: list[Constraint] = build_constraints(devices.constraints if devices else None)
        except ValueError as err:
            raise ClaimError(str(err)) from None
        self.pools: list[Pool] = gather_pools(inputs.slices, node=inputs.node, cache=pool_cache)
        uid = claim.metadata.uid if claim.metadata is not None else None
        self.allocated = AllocatedDevices.from_claims(inputs.allocated_claims, exclude_uid=uid)
        self.counters = CounterTally(self.pools, self.allocated)
        self.capacity = CapacityTally(self.allocated, share_id=share_id)
        # Selector errors are recorded per device and raised when the search reaches that device,
        # so an error on a device the scheduler would never look at does not fail the claim.
        self.selector_errors: dict[Candidate, SelectorEvaluationError] = {}

    def usable_candidates(self) -> Iterable[Candidate]:
        for pool in self.pools:
            if pool.usable:
                yield from pool.candidates

    def eligible(self, alt: Alternative) -> list[Candidate]:
        """Devices whose selectors hold (or fail with an error), in first-fit order; memoised per pool."""
        if alt.eligible is None:
            key = selector_key(alt)
            eligible: list[Candidate] = []
            for pool in self.pools:
                if not pool.usable:
                    continue
                matching, errors = pool_eligibility(pool, alt, self.matcher, key)
                eligible.extend(matching)
                self.selector_errors.update(errors)
            alt.eligible = eligible
        return alt.eligible

    def match(self, alt: Alternative, candidates: Iterable[Candidate]) -> Eligibility:
        """The candidates whose selectors hold or fail with an error (in order), and those errors."""
        return match(self.matcher, alt, candidates)

    def all_devices(self, alt: Alternative) -> list[Candidate]:
        """The devices an ``All`` request must get; raises for incomplete/invalid pools, CEL errors
        or more devices than a claim may hold (:class:`ClaimError`, as the scheduler fails it)."""
        for pool in self.pools:
            if pool.incomplete:
                raise PoolUnavailableError(
                    f"request {alt.result_name}: asks for all devices, but pool {pool.id} is being updated"
                )
            if pool.invalid is not None:
                raise PoolUnavailableError(
                    f"request {alt.result_name}: asks for all devices, but pool {pool.id} is invalid"
                )
        result = []
        for cand in self.eligible(alt):
            failure = self.selector_errors.get(cand)
            if failure is not None:
                raise failure
            amounts = consumption(alt.capacity, cand.capacity)
            if isinstance(amounts, str) or any(q > cand.capacity[n].value for n, q in amounts.items()):
                continue  # statically too small: not part of "all"
            result.append(cand)
        if len(result) > MAX_DEVICES_PER_CLAIM:  # the scheduler's check, worded as it words it
            raise ClaimError(
                f"claim {claim_label(self.claim)}: number of requested devices {len(result)} exceeds the "
                f"claim limit of {MAX_DEVICES_PER_CLAIM}"
            )
        return result

    def fits_counters(self, cand: Candidate) -> bool:
        if cand.shared and self.capacity.in_shared_use(cand.id):
            return True
        return not cand.consumes or self.counters.shortfall(cand) is None
