"""gpu-handler: the node component that reads this node's GPUs through a vendor backend.

Today it enriches PhysicalGPUs (spec §2.2.1): once the validator reports ``DriverReady=True`` for a
card bound to its vendor's driver, the handler writes ``status.capabilities``,
``status.currentState.nvidia`` and ``HardwareHealthy`` by server-side apply of only its own fields,
and keeps them current (on change and every re-enrichment period). It also keeps the offer builder's
view of each card (:mod:`pkg.gpuhandler.card_specs`) for the ResourceSlice publisher and, later,
the DRA kubelet plugin. :mod:`pkg.gpuhandler.setup` is the composition root.
"""
