"""The IMEX ensemble controller of ``gpu-controller`` (docs/compute-domains.md): one IMEX daemon
ensemble per NVLink clique that a ComputeDomain is pinned to.

A node runs at most one IMEX daemon, so daemons cannot belong to a domain when several domains may
share a node. An ensemble spans the clique instead (NVIDIA's "NVLink domain wide" deployment): its
members are the nodes whose ResourceSlices offer the clique's IMEX channel devices, not the nodes of
any job, and the domains' channels keep their jobs apart inside it. A request is named by the
clique (``<cluster UUID>.<clique ID>``, no namespace).

A pass, in chain order (``internal/handler/``): with no domain pinned to the clique, its Pods and
ConfigMap are deleted (``removal``); otherwise the members get their stable indexes, read back from
the ConfigMap's ``members.json`` (``members``), the ConfigMap is written (``config_map``) and one
daemon Pod per member of the current nodes hash is made (``pods``).

The compute-domain controller reads the ensemble (``render``: names, ``members.json``, the current
Pods) for its domains' ``status.nodes``. Layout: ``setup`` (container, reconciler, watches),
``render`` (what is written and how it is read back, pure), ``settings`` and ``indexes`` (shared
with the compute-domain controller), ``internal/{state,errors,service}``, ``internal/handler/*`` and
``internal/watch/*``.
"""
