"""Which workload Pods a fault killed by its nature, as opposed to Pods the system lost.

Some faults end the Pods they hit on any driver, ours or another: a node's reboot kills the
containers running on it (a Pod with ``restartPolicy: Never`` then fails), and a card that falls
off the bus is tainted ``NoExecute`` so that kube-controller-manager evicts the Pods using it (its
CUDA contexts are dead on real hardware). Counting those as "lost" would blame our components for
the fault itself, and hide a real loss among them. So a Pod counts as the fault's casualty only
when the evidence says the fault ended it, read from outside our code:

- ``reboot-node``: the Pod existed before the strike, runs on the rebooted node, and failed
  (its container killed) between the strike and the end of the strike's window.
- ``card-off-bus``: the Pod was given the card that fell off, and kube-controller-manager's device
  taint eviction marked it (the ``DisruptionTarget`` condition with reason
  ``DeletionByDeviceTaintManager``) within the strike's window.

Every other Pod that failed, vanished or got stuck is lost, whatever fault was under way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from soak.report import StrikeResult
from soak.workload import PodRecord

REBOOT: Final = "reboot-node"
CARD_OFF_BUS: Final = "card-off-bus"
DEVICE_TAINT_EVICTION: Final = "DeletionByDeviceTaintManager"


def casualty_of(
    record: PodRecord, strikes: Iterable[StrikeResult], *, begun: float, bound: float
) -> str | None:
    """The kind of fault that killed ``record``'s Pod by its nature, or None when nothing explains
    its end. ``begun``: the soak clock's time that the strikes' times count from; ``bound``: how
    long after its heal a strike's window lasts."""
    if record.finished is None:
        return None
    for strike in strikes:
        struck, window_end = begun + strike.struck_at, begun + strike.healed_at + bound
        if not struck <= record.finished <= window_end:
            continue
        node, _, card = strike.target.partition(" ")
        if (
            strike.kind == REBOOT
            and node == record.node
            and record.created <= struck
            and record.why.startswith("failed")
        ):
            return REBOOT
        if (
            strike.kind == CARD_OFF_BUS
            and (node, card) == (record.node, record.card)
            and record.disruption == DEVICE_TAINT_EVICTION
        ):
            return CARD_OFF_BUS
    return None
