"""The PhysicalGPU controller of ``gpu-controller``.

It keeps the inventory honest from the control plane's side, where no node agent can:

- ``DriverReady`` of every NVIDIA PhysicalGPU is the readiness of the GPU validator's Pod on its
  node (docs/architecture.md#driverready-from-the-validator): True while it is Ready, False with the Pod's own
  reason when it fails, Unknown while there is none (``internal/validator``); an Event marks each transition;
- every PhysicalGPU carries both conditions: ``HardwareHealthy`` (gpu-handler's,
  merged by key, never overwritten) and a ``DriverReady`` no validator judges start ``Unknown``
  with reason ``ValidationPending``;
- a PhysicalGPU whose Node no longer exists is deleted: its node agent is gone with the node, so
  nobody else would ever remove it;
- the ``gpu_physicalgpu_*`` inventory metrics are collected from the informer cache.

Layout (one concept per module): ``setup`` is the composition root (container, reconciler from the
framework's ``ResourceReconciler``, the Node watch), ``internal/state`` the read-only snapshot,
``internal/handler/*`` one step each, ``internal/service`` the I/O, ``metrics`` the collector.
"""
