"""Building an authenticated ``ApiClient``: in-cluster service account, or a kubeconfig file.

Components run in-cluster; tests, the demo and operators' laptops use a kubeconfig. The order is
client-go's: an explicit kubeconfig path, then ``$KUBECONFIG``, then the in-cluster service account.
"""

from __future__ import annotations

import os

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration


def new_api_client(
    kubeconfig: str | None = None,
    *,
    qps_pool_size: int = 16,
    user_agent: str | None = None,
    retries: int | None = None,
) -> ApiClient:
    """An ApiClient for the cluster; ``qps_pool_size`` bounds concurrent connections.

    ``retries`` overrides urllib3's default of three transport retries, which multiplies a request
    timeout by four: callers with a hard time budget (leader election) pass 0.
    """
    configuration = Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        kube_config.load_kube_config(config_file=path, client_configuration=configuration)
    else:
        kube_config.load_incluster_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = qps_pool_size
    if retries is not None:
        configuration.retries = retries
    client = ApiClient(configuration)
    if user_agent:
        client.user_agent = user_agent
    return client
