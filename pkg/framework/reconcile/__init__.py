"""The reconciler template: resource wrapper, handler chain and the thin reconciler (spec §10.4).

Every controller reconciles the same way: :class:`Resource` fetches the object and keeps a
baseline, handlers edit a working copy through a read-only state, and :meth:`Resource.update`
writes only the difference (metadata by JSON patch, status by the status subresource, with
``observedGeneration``). :class:`ResourceReconciler` wires those steps so a controller supplies
only its state factory and handlers.
"""

from pkg.framework.reconcile.chain import BaseReconciler, ChainOutcome, ResourceReconciler, merge_results
from pkg.framework.reconcile.handler import Finalizer, Handler, StopHandlerChain
from pkg.framework.reconcile.resource import ConflictRequeue, Resource
from pkg.framework.reconcile.writer import KubeResourceWriter, ResourceWriter

__all__ = [
    "BaseReconciler",
    "ChainOutcome",
    "ConflictRequeue",
    "Finalizer",
    "Handler",
    "KubeResourceWriter",
    "Resource",
    "ResourceReconciler",
    "ResourceWriter",
    "StopHandlerChain",
    "merge_results",
]
