"""Reading the configuration document out of its ConfigMap, with errors that name the ConfigMap.

Bounded: a ConfigMap holds at most 1 MiB, and ``yaml.safe_load`` builds plain data only.
"""

from __future__ import annotations

from typing import Any

import yaml
from kubernetes.client import V1ConfigMap
from pydantic import ValidationError

from api.gpu.v1alpha1 import OPERATOR_CONFIG_KEY, GPUOperatorConfig, GPUOperatorConfigSpec


class InvalidConfigError(ValueError):
    """The document is missing or wrong; the message names the ConfigMap and what is wrong."""


def parse_config(config_map: V1ConfigMap) -> GPUOperatorConfigSpec:
    meta = config_map.metadata
    where = f"ConfigMap {meta.namespace}/{meta.name}" if meta else "ConfigMap"
    text = (config_map.data or {}).get(OPERATOR_CONFIG_KEY)
    if text is None:
        raise InvalidConfigError(f"{where} has no key {OPERATOR_CONFIG_KEY}")
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidConfigError(f"{where}, {OPERATOR_CONFIG_KEY}: not YAML: {exc}") from None
    try:
        return GPUOperatorConfig.model_validate(data).spec
    except ValidationError as exc:
        raise InvalidConfigError(f"{where}, {OPERATOR_CONFIG_KEY}: {exc}") from None
