"""What a publish pass works on, and what the publisher remembers between passes.

:class:`PublishState` is scratch: the pass's reads (the Node, this node's PhysicalGPUs, the card
store's snapshot) are fixed when it starts, and the steps fill in the selection in chain order.

:class:`PassMemory` is the one thing that outlives a pass: when the first pass ran (the start-up
grace), whether anything was published yet, and why cards were withheld last time (logged once
per change). It is a plain object without a lock, shared by the steps of consecutive passes; that
is safe only because passes never overlap, which the :class:`~pkg.framework.reconcile.SingletonReconciler`
template guarantees by allowing one worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kubernetes.client import V1DeviceTaint, V1Node

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.reconcile import Scratch
from pkg.gpuhandler.enrichment.card_specs import CardEntry
from pkg.gpuhandler.publishing.channels import ChannelDecision
from pkg.gpuhandler.publishing.selection import Selection


@dataclass
class PassMemory:
    first_pass: float | None = None
    published: bool = False
    withheld: Mapping[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class PublishState(Scratch):
    node_name: str
    node: V1Node | None
    gpus: Mapping[str, PhysicalGPU]
    entries: Mapping[str, CardEntry]
    memory: PassMemory
    taints: Callable[[str], list[V1DeviceTaint]] = lambda _address: []  # by PCI address
    in_use: frozenset[str] | None = None  # device names in use (fill-following order); None: static
    selection: Selection | None = None
    channels: ChannelDecision | None = None  # whether IMEX channels were offered, and why not
