"""Device health end to end: one verdict per card, from the backend's health events
and its probe, that the gpu-handler shows everywhere at once.

* :mod:`.verdict` — :class:`CardHealth`, the verdict (healthy, degraded, fatal) with its reason;
* :mod:`.tracker` — :class:`HealthTracker`, the node's verdicts: events in, probe results in,
  recovery after a quiet period with a passing probe, subscribers told of every change;
* :mod:`.monitor` — the thread that reads the backend's event source and re-probes cards waiting
  to recover;
* :mod:`.taints` — the DRA device taints of a verdict (``NoSchedule`` degraded, ``NoExecute`` fatal);
* :mod:`.reporting` — Kubernetes events on the PhysicalGPU and the transitions metric.

Where the verdict goes: the enrichment writes it as ``HardwareHealthy`` (the event as reason), the
publisher puts its taints on every offer of the card, the kubelet plugin's health stream reports
the card's prepared devices Unhealthy.
"""

from pkg.gpuhandler.health.tracker import HealthTracker
from pkg.gpuhandler.health.verdict import CardHealth, HealthLevel

__all__ = ["CardHealth", "HealthLevel", "HealthTracker"]
