"""The node-labels controller of ``gpu-controller``: the node gate labels
(docs/architecture.md#gate-labels-not-hostname-lists).

Per Node, from the node's PhysicalGPUs (cache, index by node):

- ``gpu.deckhouse.io/nvidia.present=true`` while the node has an NVIDIA PhysicalGPU: the GPU
  validator's DaemonSet runs there;
- ``gpu.deckhouse.io/driver-ready=true`` while one of its PhysicalGPUs is ``DriverReady=True``:
  gpu-handler, nv-hostengine and dcgm-exporter run there.

A label whose reason is gone is removed, not set to ``false``, so a DaemonSet's node selector needs
only ``key=true``. Only these two keys are ever written (a JSON merge patch of just them), so the
node agent's ``gpu.deckhouse.io/`` labels and anyone else's are untouched.

Layout, one module per role (the controller is one step; docs/framework.md#how-far-to-split-a-controller):
``setup`` (container and registration), ``reconciler`` (the snapshot, the step and the template),
``watch`` (what wakes a Node), ``service`` (the patch).
"""
