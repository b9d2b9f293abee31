"""Pod events → the claims the Pod references.

A Pod that starts referencing a claim takes it away from us (the scheduler allocates it); a Pod
that goes away gives it back. Finishing does not (:mod:`~pkg.dracontroller.internal.eligibility`
says why): a phase change wakes nothing, and the finished Pod's delete event, which still carries
its references, is what hands the claim back. A Pod deleted before it was scheduled gives its
claims back at once, on the update that sets its deletionTimestamp. Only updates that change the
set of referenced claims matter — status heartbeats of running Pods would otherwise wake their
claims all the time. On an update both the old and the new set are woken, so a claim the Pod
stopped referencing is seen.
"""

from __future__ import annotations

from typing import Any

from pkg.dracontroller.internal.eligibility import claims_of_pod
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile.contract import Request


def _requests(obj: Any) -> list[Request]:
    requests = []
    for key in claims_of_pod(obj):
        namespace, _, name = key.partition("/")
        requests.append(Request(name=name, namespace=namespace))
    return requests


def pod_watch() -> ObjectRefWatch:
    return ObjectRefWatch(
        update_filter=lambda old, new: claims_of_pod(old) != claims_of_pod(new), enqueuer=_requests
    )
