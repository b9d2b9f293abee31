"""The DRA device taints of a verdict (``resource.k8s.io/v1`` ``DeviceTaint``).

One taint per unhealthy card, on every offer of the card (Physical, shared, every MIG placement):
whichever offer a claim got, the card under it is the one that failed.

* key ``gpu.deckhouse.io/unhealthy`` (a label key under our domain), so an admin tolerates our
  health taints and nobody else's;
* value: the event (``Xid48DoubleBitEccError``) or the probe's fault (``RowRemappingPending``),
  a label value (at most 63 characters of ``[A-Za-z0-9]``, which reasons are);
* effect ``NoSchedule`` for ``Degraded`` (no new allocations; running Pods stay) and
  ``NoExecute`` for ``Fatal`` (the device-taint eviction controller also deletes the Pods whose
  claims use the device, unless they tolerate it);
* ``timeAdded`` = when the verdict began. The API server fills it in when missing, so sending
  none would make every publish see a difference and write the slices again.

A card of a multi-node NVLink fabric that is not Ready gets one more, ``NoSchedule``, under its
own key (``gpu.deckhouse.io/fabric-not-ready`` or ``…/fabric-degraded``, :mod:`.fabric`): a
claim that tolerates one kind of fault does not thereby tolerate the other.
"""

from __future__ import annotations

from typing import Final

from kubernetes.client import V1DeviceTaint

from pkg.domain.names import DRIVER
from pkg.gpuhandler.health.fabric import FabricFault
from pkg.gpuhandler.health.verdict import CardHealth, HealthLevel

TAINT_KEY: Final = f"{DRIVER}/unhealthy"
EFFECTS: Final = {HealthLevel.DEGRADED: "NoSchedule", HealthLevel.FATAL: "NoExecute"}
FABRIC_EFFECT: Final = "NoSchedule"  # the card still runs what it runs; new multi-node work waits


def device_taints(health: CardHealth | None, fabric: FabricFault | None = None) -> list[V1DeviceTaint]:
    """The taints every offer of a card with ``health`` and ``fabric`` fault carries (none when
    healthy and its fabric, if any, is Ready)."""
    taints = []
    if health is not None and not health.healthy:
        taints.append(
            V1DeviceTaint(
                key=TAINT_KEY, value=health.reason[:63], effect=EFFECTS[health.level], time_added=health.since
            )
        )
    if fabric is not None:
        taints.append(
            V1DeviceTaint(key=fabric.key, value=fabric.value, effect=FABRIC_EFFECT, time_added=fabric.since)
        )
    return taints
