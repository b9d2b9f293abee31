"""The state one sync works on: what the caches hold, what the scan found, what went wrong.

A sync is level-based and node-wide: it starts from the informer caches (this node's PhysicalGPUs
and its Node, nothing else: docs/architecture.md#node-components-touch-only-their-node), the discover step
adds what the hardware shows, and the later steps compare the two. The inputs are fixed when the sync starts;
the steps only append to the outputs (``gpus``, ``unreadable``, ``failures``, counters), so each step can be
tested with a hand-built state.

Failures of one card or one object are collected rather than raised, so one odd device does not
stop the others from being written or gone cards from being deleted; the reconciler raises once at
the end and the whole sync is retried with backoff. The one exception is a failed scan: the
discover step raises, the chain stops, and nothing is deleted on the strength of an empty scan.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from kubernetes.client import V1Node

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.reconcile.handler import Scratch
from pkg.hardware.hostinfo import HostInfo
from pkg.inventory.discovery import DiscoveredGPU
from pkg.inventory.naming import ObjectIndex, index_objects

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Failure:
    """One thing a step could not do: the step, what it was about, and why."""

    step: str
    subject: str  # e.g. "PhysicalGPU node-1-0-10de-20b7 (PCI 0000:3b:00.0)"
    error: Exception

    def __str__(self) -> str:
        return f"{self.step}: {self.subject}: {self.error}"


@dataclass
class SyncState(Scratch):
    """The scratch state of one sync (see the module docs); ``started`` times the pass."""

    node_name: str
    node_label: str  # the node's value of gpu.deckhouse.io/node (a label value, maybe shortened)
    existing: Sequence[PhysicalGPU]  # this node's PhysicalGPUs, from the cache
    node: V1Node | None  # this node, from the cache
    host: HostInfo | None = None
    known_vendors: frozenset[str] = frozenset()  # vendor label values of the loaded backends
    gpus: list[DiscoveredGPU] = field(default_factory=list)
    unreadable: set[str] = field(default_factory=set)  # address keys seen but not readable
    failures: list[Failure] = field(default_factory=list)
    writes: int = 0
    started: float = field(default_factory=time.monotonic)

    @cached_property
    def objects(self) -> ObjectIndex:
        return index_objects(self.existing)

    def fail(self, step: str, subject: str, error: Exception) -> None:
        """Records a failure and logs it with its object; the sync goes on and is retried later."""
        logger.error(
            "%s failed for %s: %s",
            step,
            subject,
            error,
            extra={"node": self.node_name, "step": step, "subject": subject},
        )
        self.failures.append(Failure(step=step, subject=subject, error=error))


StateFactory = Callable[[], SyncState]
