"""The ``computeDomains`` settings out of the operator configuration ConfigMap (from the cache).

The orchestrator reports a broken document on the ConfigMap; here it only keeps the daemons from
being rendered, with a message the domains' status repeats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes.client import V1ConfigMap
from pydantic import ValidationError

from api.gpu.v1alpha1 import OPERATOR_CONFIG_KEY, ComputeDomainSettings, GPUOperatorConfig


@dataclass(frozen=True)
class DaemonSettings:
    """What the daemon Pods are rendered from; ``problem`` says why there are none."""

    settings: ComputeDomainSettings | None
    driver_root: str = "/"
    problem: str | None = None


def read_settings(config_map: V1ConfigMap | None, *, where: str) -> DaemonSettings:
    """``where`` names the ConfigMap (``namespace/name``) in the messages."""
    if config_map is None:
        return DaemonSettings(None, problem=f"the operator configuration ConfigMap {where} does not exist")
    text = (config_map.data or {}).get(OPERATOR_CONFIG_KEY)
    if text is None:
        return DaemonSettings(None, problem=f"ConfigMap {where} has no key {OPERATOR_CONFIG_KEY}")
    try:
        data: Any = yaml.safe_load(text)
        spec = GPUOperatorConfig.model_validate(data).spec
    except (yaml.YAMLError, ValidationError) as exc:
        return DaemonSettings(None, problem=f"ConfigMap {where}, {OPERATOR_CONFIG_KEY} is invalid: {exc}")
    settings = spec.compute_domains
    if not settings.enabled:
        return DaemonSettings(None, problem=f"computeDomains is not enabled in ConfigMap {where}")
    return DaemonSettings(settings, driver_root=spec.driver_root)
