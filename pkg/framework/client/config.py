"""Building an authenticated ``ApiClient``: in-cluster service account, or a kubeconfig file.

Components run in-cluster; tests, the demo and operators' laptops use a kubeconfig. The order is
client-go's: an explicit kubeconfig path, then ``$KUBECONFIG``, then the in-cluster service account.
"""

from __future__ import annotations

import os

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration

_INCLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


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


def kubectl_api_client(
    kubeconfig: str | None = None, *, context: str | None = None, user_agent: str | None = None
) -> tuple[ApiClient, str]:
    """An ApiClient found the way kubectl finds one, and the namespace its context names.

    kubectl's order, not a component's: ``--kubeconfig``, then ``$KUBECONFIG`` (a list of files,
    merged), then ``~/.kube/config`` when it exists, and only then the in-cluster account (whose
    namespace is the Pod's). ``context`` picks a context other than the current one. The
    namespace is ``"default"`` where the context names none, as in kubectl.
    """
    configuration = Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or _home_kubeconfig()
    if path:
        kube_config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
        contexts, current = kube_config.list_kube_config_contexts(config_file=path)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
        namespace = str(((chosen or {}).get("context") or {}).get("namespace") or "default")
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        kube_config.load_incluster_config(client_configuration=configuration)
        namespace = _incluster_namespace()
    else:
        raise FileNotFoundError("no kubeconfig: pass --kubeconfig, set KUBECONFIG or create ~/.kube/config")
    client = ApiClient(configuration)
    if user_agent:
        client.user_agent = user_agent
    return client, namespace


def _home_kubeconfig() -> str | None:
    path = os.path.expanduser("~/.kube/config")
    return path if os.path.isfile(path) else None


def _incluster_namespace() -> str:
    try:
        with open(_INCLUSTER_NAMESPACE, encoding="utf-8") as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"
