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
"""

from __future__ import annotations

from typing import Final

from kubernetes.client import V1DeviceTaint

from pkg.domain.names import DRIVER
from pkg.gpuhandler.health.verdict import CardHealth, HealthLevel

TAINT_KEY: Final = f"{DRIVER}/unhealthy"
EFFECTS: Final = {HealthLevel.DEGRADED: "NoSchedule", HealthLevel.FATAL: "NoExecute"}


def device_taints(health: CardHealth | None) -> list[V1DeviceTaint]:
    """The taints every offer of a card with ``health`` carries (none when healthy)."""
    if health is None or health.healthy:
        return []
    return [
        V1DeviceTaint(
            key=TAINT_KEY, value=health.reason[:63], effect=EFFECTS[health.level], time_added=health.since
        )
    ]
