"""gpu-node-agent: this node's PCI GPUs as PhysicalGPU objects, and its host facts as Node labels.

One agent runs per node (DaemonSet) and owns exactly its node's inventory
(docs/architecture.md#node-agent-owns-its-nodes-inventory):

* **discover** scans ``<sysfs-root>/bus/pci/devices``; a GPU is a VGA/3D-class function of a vendor
  that a registered backend claims (:mod:`pkg.backends`);
* **apply** creates each card's PhysicalGPU (named ``<node>-<index>-<vendorID>-<deviceID>``, matched
  by PCI address afterwards), its labels and its status fields ``pciInfo``, ``nodeInfo`` and
  ``currentState.driverType`` (server-side apply, field manager ``gpu-node-agent``);
* **cleanup** deletes the objects of cards that are gone (uid precondition);
* **node-labels** writes the bare-metal, OS and kernel labels on its Node (docs/architecture.md#host-labels).

The sync is one request of a single-worker controller; start-up, PCI uevents, deleted objects,
SIGHUP and a jittered periodic resync all enqueue it (:mod:`pkg.nodeagent.reconciler`). Nothing is
written when the caches already hold the desired fields.
"""
