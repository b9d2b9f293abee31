"""The allocation controller of ``gpu-dra-controller``.

The kube-scheduler allocates the claims of the Pods it schedules. This controller allocates the
claims no scheduler ever will: unallocated ResourceClaims of *our* device classes that no Pod
references — pre-provisioned and shared claims, claims for VMs. It never allocates a claim that a
Pod references, so it never ignores a Pod's node constraints: the Pod cache can lag the claim cache,
so the Pods are read afresh right before the allocation is written (and right after, giving it
back if a Pod appeared during the write); see docs/allocator.md.

A reconcile of one claim (level-based, from the informer caches):

1. **eligibility** — stop unless the claim is ours to handle (``internal/eligibility.py``);
2. **collision** — a claim *we* allocated that shares a device (or over-commits counters or
   capacity) with another claim and that no Pod reserves yet gives its allocation back, so the
   next pass allocates it elsewhere (the API server does not stop two allocators from racing);
3. **allocate** — run the allocator (best fit), confirm no Pod references the claim, and write
   ``status.allocation`` with optimistic concurrency, or emit ``AllocationFailed`` and retry with
   backoff (a claim a Pod references gets ``LeftToScheduler`` instead).

Releasing: our allocations carry the scheduler's finalizer ``resource.kubernetes.io/delete-protection``,
which is what kube-controller-manager's resourceclaim controller keys on: when such a claim is
deleted and no Pod reserves it, that controller clears ``status.allocation`` and removes the
finalizer (and it deallocates a claim whose last consumer went away). So deletion releases the
devices with nothing of ours in the path; see ``internal/names.py``.

Layout: ``setup`` (composition root), ``reconciler`` (thin), ``internal/state`` (the claim
snapshot one reconcile judges), ``internal/handler/*`` (one step each), ``internal/service/*``
(cache readers, the writer, the in-flight record of our writes, the fresh Pod read, the
LeftToScheduler event), ``internal/watch/*`` (which events wake which claims); ``heap`` runs the
process's GC policy.
"""
