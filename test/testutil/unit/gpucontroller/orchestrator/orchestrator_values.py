"""Values shared by the unit tests of the gpu-controller orchestrator's handlers, each run alone:
the configuration document (node agent and validator enabled), its ConfigMap, the DaemonSets an
earlier pass left in the cache and the state as the parse step leaves it."""

from __future__ import annotations

import yaml
from kubernetes.client import (
    V1ConfigMap,
    V1DaemonSet,
    V1DaemonSetSpec,
    V1LabelSelector,
    V1ObjectMeta,
    V1PodTemplateSpec,
)

from pkg.gpucontroller.orchestrator.internal.config import parse_config
from pkg.gpucontroller.orchestrator.internal.state import OrchestratorState
from pkg.gpucontroller.orchestrator.render import RenderContext, render_all

DOCUMENT = {
    "apiVersion": "gpu.deckhouse.io/v1alpha1",
    "kind": "GPUOperatorConfig",
    "spec": {"nodeAgent": {"image": "agent:1"}, "validator": {"image": "validator:1"}},
}


def config_map(data: dict[str, str] | None = None) -> V1ConfigMap:
    return V1ConfigMap(
        metadata=V1ObjectMeta(name="gcp", namespace="gpu", uid="cm-uid"),
        data=data if data is not None else {"config.yaml": yaml.safe_dump(DOCUMENT)},
    )


def owned(component: str, generation: int = 1) -> V1DaemonSet:
    """A DaemonSet of ``component`` as the cache holds it after an earlier pass."""
    return V1DaemonSet(
        metadata=V1ObjectMeta(
            name=f"gcp-{component}",
            namespace="gpu",
            uid=f"uid-{component}",
            generation=generation,
            labels={"app.kubernetes.io/component": component},
        ),
        spec=V1DaemonSetSpec(selector=V1LabelSelector(), template=V1PodTemplateSpec()),
    )


def parsed(*cached: V1DaemonSet) -> OrchestratorState:
    """The state as the parse step leaves it: the document's DaemonSets rendered."""
    cm = config_map()
    context = RenderContext(config_map=cm, spec=parse_config(cm))
    return OrchestratorState(config_map=cm, owned=cached, context=context, desired=render_all(context))
