"""A DRA kubelet plugin: what a driver needs to be called by the kubelet on its node.

The kubelet finds the plugin through a registration socket in its ``plugins_registry`` folder,
learns from ``GetInfo`` where the plugin's DRA socket is and which API versions it serves, then
calls ``NodePrepareResources``/``NodeUnprepareResources`` there for the claims of Pods that start
and stop on the node, and reads the health of the driver's devices from ``NodeWatchResources``.
This package serves all of that over gRPC, from our own .proto files (``wire/``), and hands the
work to a :class:`~pkg.framework.kubeletplugin.types.Driver` in plain Python types; it knows nothing of GPUs.

Modules: ``types`` (the driver's side: claims in, prepared devices or errors out; device health),
``sockets`` (where the two sockets live, named per instance so two can overlap), ``registration``,
``dra_service`` (v1 and v1beta1), ``health_service`` (v1 and v1alpha1), ``server`` (the runnable
that serves them).
"""
