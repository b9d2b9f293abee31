"""Reconciling: the contract, the handler chain and the two templates.

* :mod:`.contract`: ``Request``, ``Result``, ``TerminalError``, the ``Reconciler`` protocol;
* :mod:`.handler`: a step of a reconcile (``Handler``), ``StopHandlerChain``, the ``AfterWrite``
  hook, and the two kinds of state (``Snapshot``, read-only; ``Scratch``, filled in chain order);
* :mod:`.chain`: the ``HandlerChain`` both templates run;
* :mod:`.object_reconciler`: fetch -> state -> handlers -> pluggable writer -> conclude;
  ``ResourceReconciler`` with the :class:`Resource` writer (guarded metadata patch, status PUT);
* :mod:`.singleton`: one request for a whole unit, one worker, declared by the template;
* :mod:`.conditions`: Kubernetes condition semantics.

No controller writes its own ``reconcile`` loop: each picks a template and supplies its state,
handlers and, if it needs them, a writer and a ``conclude``.
"""

from pkg.framework.reconcile.chain import ChainOutcome, HandlerChain, merge_results
from pkg.framework.reconcile.contract import Reconciler, Request, Result, TerminalError
from pkg.framework.reconcile.handler import AfterWrite, Handler, Scratch, Snapshot, StopHandlerChain
from pkg.framework.reconcile.object_reconciler import (
    Conclude,
    ObjectReconciler,
    ResourceReconciler,
    ResourceUpdate,
    StateWriter,
    raise_or_result,
)
from pkg.framework.reconcile.resource import ConflictRequeue, Resource
from pkg.framework.reconcile.singleton import SingletonReconciler
from pkg.framework.reconcile.writer import KubeResourceWriter, ResourceWriter

__all__ = [
    "AfterWrite",
    "ChainOutcome",
    "Conclude",
    "ConflictRequeue",
    "Handler",
    "HandlerChain",
    "KubeResourceWriter",
    "ObjectReconciler",
    "Reconciler",
    "Request",
    "Resource",
    "ResourceReconciler",
    "ResourceUpdate",
    "ResourceWriter",
    "Result",
    "Scratch",
    "SingletonReconciler",
    "Snapshot",
    "StateWriter",
    "StopHandlerChain",
    "TerminalError",
    "merge_results",
    "raise_or_result",
]
