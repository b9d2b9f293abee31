"""The objects an allocation depends on, read from the API server.

Reads exactly what gpu-dra-controller's caches hold for one decision: every ResourceSlice and
DeviceClass, every ResourceClaim (the allocated ones are what the claim must avoid), the claim's
Namespace (admin access) and, with ``--node``, that Node. One list per kind, so the explanation
is computed from a view as consistent as the controller's. Read-only: nothing is written.

The ResourceSlices, by far the largest read (209 MB of JSON at 1,000 nodes of 8 H100), come
through :mod:`.slice_reader`: raw pages, each distinct device part validated once.
"""

from __future__ import annotations

import contextlib

from urllib3.exceptions import HTTPError

from pkg.dra.explain.bundle import BundleError, ExplainObjects
from pkg.dra.explain.slice_reader import SliceReadError, read_slices
from pkg.framework.client import ApiError, KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NAMESPACE, NODE, RESOURCE_CLAIM
from pkg.framework.client.config import new_api_client


class ClusterError(Exception):
    """The cluster could not be read; the message says what failed."""


def load_cluster(
    *, kubeconfig: str | None, namespace: str, node: str | None, client: KubeClient | None = None
) -> ExplainObjects:
    try:
        kube = client or KubeClient(
            new_api_client(kubeconfig, user_agent="gpu-dra-controller-explain"), field_manager="explain"
        )
    except Exception as err:  # kubeconfig loading raises a zoo of types (ConfigException, OSError...)
        raise ClusterError(f"cannot load the kubeconfig: {err}") from None
    objects = ExplainObjects()
    try:
        objects.slices = read_slices(kube)
        classes, _ = kube.list(DEVICE_CLASS)
        claims, _ = kube.list(RESOURCE_CLAIM)
        with contextlib.suppress(NotFoundError):  # without the Namespace: no labels, no admin access
            objects.add(kube.get(NAMESPACE, namespace), f"namespace {namespace}")
        if node is not None:
            objects.add(kube.get(NODE, node), f"node {node}")
    except NotFoundError as err:
        raise ClusterError(f"not found: {err.message}") from None
    except (ApiError, HTTPError, OSError) as err:
        raise ClusterError(f"cannot read the cluster: {err}") from None
    except (SliceReadError, ValueError) as err:  # ValueError: a page that is not JSON
        raise ClusterError(f"cannot read the ResourceSlices: {err}") from None
    try:
        for obj in (*classes, *claims):
            objects.add(obj, "cluster")
    except BundleError as err:
        raise ClusterError(str(err)) from None
    return objects
