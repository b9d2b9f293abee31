"""A node's GPU inventory: which PCI functions are GPUs, and what their PhysicalGPUs say.

Two binaries need the same answer: gpu-node-agent writes it as PhysicalGPU objects, and
gpu-handler's offline view (``gpu-handler offers``) prints what the agent would write, without a
cluster. Neither may reach into the other's internals, so the shared part lives here, one layer
below the components: the discovery over sysfs and the host files (:mod:`.discovery`), the desired
labels and status fields (:mod:`.desired`), and the naming of PhysicalGPU objects (:mod:`.naming`).
Nothing here talks to the API server or runs a controller.
"""
