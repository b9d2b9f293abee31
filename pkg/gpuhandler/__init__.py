"""gpu-handler: the node component that reads this node's GPUs through a vendor backend.

Its parts, one package each, each importing only the ones listed after it:

* :mod:`.setup` — the composition root; :mod:`.offline` — ``gpu-handler offers``, the same code
  paths without a cluster;
* :mod:`.publishing` — this node's ResourceSlices; :mod:`.preparation` — the DRA kubelet plugin;
* :mod:`.enrichment` — each PhysicalGPU's capabilities, live driver state and ``HardwareHealthy``,
  and the card specs the publisher builds its offers from;
* :mod:`.health` — one health verdict per card, from the backend's events and probes;
* :mod:`.node_lock` — the lock the publisher and the kubelet plugin share on the node.
"""
