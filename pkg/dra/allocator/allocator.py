"""The allocator: find devices for every request of one claim, like the kube-scheduler does.

The search is the scheduler's: requests in claim order; for ``firstAvailable`` the subrequests in
order; for each required device the candidates in strategy order, each checked and tentatively
taken (in use? → node → taints → capacity → counters → constraints), then recursion into the next
device; on a dead end the last choice is undone and the next candidate tried. Within one request a
later device always comes after the earlier one in the order, so combinations are tried, never
permutations. The first complete solution wins — which is why :mod:`.strategy` decides the policy.

Contract of :meth:`Allocator.allocate`: it returns the ``V1AllocationResult`` to write into
``status.allocation`` (it never writes it), or :class:`~pkg.dra.model.Unschedulable`: not fatal
when capacity is missing (retry when slices or claims change), fatal when the claim or a class is
broken (CEL error, unknown class, admin access outside an admin namespace). The search is bounded
by ``max_steps`` tried devices. ``allocate`` is thread-safe; selector results and compiled CEL
programs are cached inside the ``Allocator`` across calls, so keep one instance per process.
"""

from __future__ import annotations

import gc
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceClass,
    V1Node,
    V1ResourceSlice,
)

from pkg.dra.allocator.attempt import AllocationAttempt, AllocationInputs
from pkg.dra.allocator.capacity import consumption
from pkg.dra.allocator.cel_env import CelEnvironment
from pkg.dra.allocator.context import AllocationContext, PoolUnavailableError, pool_eligibility, selector_key
from pkg.dra.allocator.pools import Candidate, PoolCache, gather_pools
from pkg.dra.allocator.quantity import Quantity
from pkg.dra.allocator.requests import MAX_DEVICES_PER_CLAIM, Alternative, ClaimError, class_alternative
from pkg.dra.allocator.result import Chosen, build_result
from pkg.dra.allocator.selection import SelectorEvaluationError, SelectorMatcher
from pkg.dra.allocator.strategy import BestFit, CandidateStream, Strategy
from pkg.dra.allocator.taints import blocking_taint
from pkg.dra.model import DeviceID, Unschedulable, UnschedulableKind

Undo = Callable[[], None]


class _BudgetExhaustedError(Exception):
    pass


class _ConstraintViolatedError(Exception):
    pass


SETTLE_AFTER_DEVICES = 10_000


class Allocator:
    def __init__(
        self,
        *,
        strategy: Strategy | None = None,
        env: CelEnvironment | None = None,
        share_id: Callable[[], str] | None = None,
        max_steps: int = 200_000,
        pool_cache: PoolCache | None = None,
        settle_after_devices: int = SETTLE_AFTER_DEVICES,
    ) -> None:
        self.strategy: Strategy = strategy or BestFit()
        self.matcher = SelectorMatcher(env or CelEnvironment())
        self._share_id = share_id or (lambda: str(uuid.uuid4()))
        self._max_steps = max_steps
        self._pool_cache = pool_cache or PoolCache()
        self._settle_after = settle_after_devices
        self._settled_at = 0
        self._settle_lock = threading.Lock()

    def settle_heap(self) -> bool:
        """Takes the long-lived heap out of the garbage collector's sight after a large pool build;
        True when it did. A process calls it on its own schedule (gpu-dra-controller: the
        ``HeapSettler`` runnable of ``pkg.dracontroller.heap``), never inside ``allocate``.

        Why: a cluster's pools are hundreds of thousands of objects (and the informer caches they
        come from millions), and every full collection of CPython's cyclic GC walks all of them —
        at 1000 nodes a few hundred milliseconds, at unpredictable moments, in the middle of
        decisions. Once at least ``settle_after_devices`` devices were built since the last settle
        (a restart, a leader change, many republished nodes), this collects once and then freezes
        every live object (``gc.freeze``): later collections walk only what is newer.
        Frozen objects are still freed by reference counting; a frozen pool that is later replaced
        is part of a reference cycle (devices point to their pool), so it waits for the next
        settle, which unfreezes first — the memory held that way is bounded by the threshold.
        """
        with self._settle_lock:
            built = self._pool_cache.built_devices
            if built - self._settled_at < self._settle_after:
                return False
            self._settled_at = built
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            return True

    def warm_classes(
        self,
        slices: Iterable[V1ResourceSlice],
        classes: Mapping[str, V1DeviceClass],
        *,
        stop: Callable[[], bool] = lambda: False,
    ) -> int:
        """Makes, for every class and every usable pool (all nodes), the selector pass an attempt or
        an explanation of a claim naming that class would otherwise make the first time it looks at
        the pool, and names the pool's devices (:meth:`~.pools.Pool.name_candidates`). Returns how
        many (class, pool) passes it made, 0 when all were memoised already (so a caller may repeat
        it cheaply); ``stop`` is asked between passes.

        Why: a claim's selector verdicts are memoised per pool (:func:`~.context.pool_eligibility`),
        but best fit looks only at the pools it needs, so the first explanation of a class, which
        judges every device, matched the rest then — about a second per class at 1,000 nodes x
        8 H100, on the user's clock. A process calls this on its own schedule (gpu-dra-controller:
        the ``SelectorWarmer`` of ``pkg.dracontroller.warmup``), never inside ``allocate``. It warms
        the verdicts of requests with no selectors of their own, which is what a class is for. A
        selector that fails to compile or evaluate is memoised with its errors, as an attempt
        memoises them; a class with a selector that is not CEL is skipped (its claims fail on it).
        """
        pools = [p for p in gather_pools(slices, node=None, cache=self._pool_cache) if p.usable]
        passes = 0
        for name, device_class in classes.items():
            try:
                alt = class_alternative(name, device_class, self.matcher.env)
            except ClaimError:
                continue
            key = selector_key(alt)
            for pool in pools:
                if key in pool.eligible_memo:
                    continue
                if stop():
                    return passes
                if not pool.eligible_memo:  # new to every class: its devices are unnamed too
                    pool.name_candidates()
                pool_eligibility(pool, alt, self.matcher, key)
                passes += 1
        return passes

    def context(self, claim: ResourceV1ResourceClaim, inputs: AllocationInputs) -> AllocationContext:
        """The prepared inputs of one attempt, before the claim takes anything (raises
        ``ClaimError``); :mod:`.explain` diagnoses devices against it."""
        return AllocationContext(
            claim, inputs, matcher=self.matcher, share_id=self._share_id, pool_cache=self._pool_cache
        )

    def allocate(
        self,
        claim: ResourceV1ResourceClaim,
        *,
        slices: Iterable[V1ResourceSlice],
        classes: Iterable[V1DeviceClass] | Mapping[str, V1DeviceClass],
        allocated_claims: Iterable[ResourceV1ResourceClaim],
        namespace_labels: Mapping[str, str] | None = None,
        node: V1Node | None = None,
    ) -> V1AllocationResult | Unschedulable:
        """Allocate ``claim`` on ``node`` (None: on any one node). See the module docstring."""
        inputs = AllocationInputs.of(
            slices=slices,
            classes=classes,
            allocated_claims=allocated_claims,
            namespace_labels=namespace_labels,
            node=node,
        )
        return self.attempt(claim, inputs).outcome

    def attempt(self, claim: ResourceV1ResourceClaim, inputs: AllocationInputs) -> AllocationAttempt:
        """Allocate ``claim`` from ``inputs``; the attempt keeps both with the outcome, so it can be
        explained later without allocating again (:func:`~.explain.explain`)."""
        return AllocationAttempt(claim=claim, inputs=inputs, outcome=self._decide(claim, inputs))

    def _decide(
        self, claim: ResourceV1ResourceClaim, inputs: AllocationInputs
    ) -> V1AllocationResult | Unschedulable:
        try:
            ctx = self.context(claim, inputs)
            search = _Search(ctx, self.strategy, self._max_steps)
            found = search.request(0)
        except ClaimError as err:
            return Unschedulable("claim cannot be allocated as written", fatal=True, errors=(str(err),))
        except SelectorEvaluationError as failure:
            return Unschedulable("device selector failed", fatal=True, errors=(str(failure),))
        except PoolUnavailableError as err:
            return Unschedulable(
                "a resource pool is not ready", errors=(str(err),), kind=UnschedulableKind.POOL_NOT_READY
            )
        except _BudgetExhaustedError:
            return Unschedulable(
                f"search gave up after {self._max_steps} tried devices", kind=UnschedulableKind.SEARCH_LIMIT
            )
        if not found:
            invalid = tuple(f"pool {p.id}: {p.invalid}" for p in ctx.pools if p.invalid is not None)
            if invalid:
                return Unschedulable(
                    "cannot allocate all claims; invalid resource pools were encountered", errors=invalid
                )
            return Unschedulable("cannot allocate all claims")
        return build_result(ctx, search.chosen, node=inputs.node, bound_node=search.bound_node)


class _Search:
    def __init__(self, ctx: AllocationContext, strategy: Strategy, max_steps: int) -> None:
        self.ctx = ctx
        self.strategy = strategy
        self.steps_left = max_steps
        self.chosen: list[Chosen] = []
        self.allocating: set[DeviceID] = set()  # devices this claim takes exclusively
        self.bound_node: str | None = None  # with node=None, the node the first node-local device fixes
        self.bound_count = 0

    def request(self, index: int) -> bool:
        plans = self.ctx.plans
        if index == len(plans):
            return True
        plan = plans[index]
        for position, alt in enumerate(plan.alternatives):
            if self._alternative(alt, index):
                plan.chosen = position
                return True
        return False

    def _alternative(self, alt: Alternative, index: int) -> bool:
        if alt.all_devices:
            devices = self.ctx.all_devices(alt)
            if not devices:
                return False
            undos: list[Undo] = []
            for cand in devices:
                try:
                    undo = self._take(alt, cand, must=True)
                except _ConstraintViolatedError:
                    raise ClaimError(
                        f"request {alt.result_name}: cannot add device {cand.id} because a claim constraint "
                        "would not be satisfied"
                    ) from None
                if undo is None:
                    break
                undos.append(undo)
            else:
                if self.request(index + 1):
                    return True
            for undo in reversed(undos):
                undo()
            return False
        order = self.strategy.search_order(self.ctx, alt)
        return self._pick(alt, index, order, 0, alt.count)

    def _pick(self, alt: Alternative, index: int, order: CandidateStream, start: int, remaining: int) -> bool:
        if remaining == 0:
            return self.request(index + 1)
        errors = self.ctx.selector_errors
        position = start
        while order.has(position):
            cand = order[position]
            position += 1
            if errors and cand in errors:
                raise errors[cand]
            undo = self._take(alt, cand, must=False)
            if undo is None:
                continue
            if self._pick(alt, index, order, position, remaining - 1):
                return True
            undo()
        return False

    def _take(self, alt: Alternative, cand: Candidate, *, must: bool) -> Undo | None:
        """Tentatively allocate ``cand`` for ``alt``; the returned callable undoes it."""
        self.steps_left -= 1
        if self.steps_left < 0:
            raise _BudgetExhaustedError
        ctx = self.ctx
        device_id = cand.id
        if device_id in self.allocating or (not alt.admin_access and device_id in ctx.allocated.dedicated):
            return None
        if len(self.chosen) >= MAX_DEVICES_PER_CLAIM:
            return None
        if ctx.node is None and cand.node_name and self.bound_node not in (None, cand.node_name):
            return None
        if cand.device.taints and blocking_taint(cand.device.taints, alt.tolerations) is not None:
            return None
        amounts = consumption(alt.capacity, cand.capacity) if cand.capacity or alt.capacity else {}
        if isinstance(amounts, str) or (amounts and ctx.capacity.exceeded(device_id, amounts, cand.capacity)):
            return None
        charged = False
        if cand.consumes and not (cand.shared and ctx.capacity.in_shared_use(device_id)):
            if ctx.counters.charge(cand) is not None:
                return None
            charged = True
        for added, constraint in enumerate(ctx.constraints):
            if not constraint.add(alt.request_name, alt.subrequest_name, cand):
                for done in reversed(ctx.constraints[:added]):
                    done.remove(alt.request_name, alt.subrequest_name, cand)
                if charged:
                    ctx.counters.refund(cand)
                if must:
                    raise _ConstraintViolatedError
                return None
        return self._commit(alt, cand, amounts, charged)

    def _commit(self, alt: Alternative, cand: Candidate, amounts: dict[str, Quantity], charged: bool) -> Undo:
        ctx = self.ctx
        share_id = None
        if cand.shared:
            share_id = ctx.capacity.new_share_id()
            ctx.capacity.add_share(cand.id, amounts)
        else:
            self.allocating.add(cand.id)
        binds = ctx.node is None and cand.node_name is not None
        if binds:
            self.bound_node = cand.node_name
            self.bound_count += 1
        self.chosen.append(Chosen(alt, cand, share_id, amounts if cand.shared else {}))

        def undo() -> None:
            self.chosen.pop()
            if binds:
                self.bound_count -= 1
                if not self.bound_count:
                    self.bound_node = None
            if cand.shared:
                ctx.capacity.remove_share(cand.id, amounts)
            else:
                self.allocating.discard(cand.id)
            for constraint in reversed(ctx.constraints):
                constraint.remove(alt.request_name, alt.subrequest_name, cand)
            if charged:
                ctx.counters.refund(cand)

        return undo
