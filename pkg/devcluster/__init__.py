"""A local Kubernetes control plane for integration tests and the demo.

Real etcd, kube-apiserver, kube-scheduler and kube-controller-manager processes (built by
``hack/tools/build.sh``) on loopback ports, with generated certificates, RBAC and the DRA
feature gates the project relies on. The components of this project never import this package;
it exists so that tests exercise the API server's real validation, watch, conflict, apply and
scheduling behaviour instead of a fake.
"""

from pkg.devcluster.cluster import ControlPlane, ControlPlaneConfig

__all__ = ["ControlPlane", "ControlPlaneConfig"]
