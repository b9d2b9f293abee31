"""GpuConfig: the opaque configuration of ``gpu.deckhouse.io`` devices: the sharing settings and driver
capabilities a DeviceClass (made from a GPUClass) or a ResourceClaim hands to gpu-handler's Prepare.

It travels in a DeviceClass's ``spec.config`` or a ResourceClaim's ``spec.devices.config`` as
``opaque: {driver: gpu.deckhouse.io, parameters: <GpuConfig>}``; the scheduler copies it into the
claim's allocation and the kubelet plugin reads it there when it prepares the devices. The API
server never validates opaque parameters, so the plugin does, strictly: a field it does not know
or a value of the wrong type fails the Prepare with an error naming the claim and the field,
instead of being silently ignored (a typo in ``timeSlicing`` must not quietly mean "default").

Example (a DeviceClass of 50% TimeSlicing shares with a short time slice)::

    config:
    - opaque:
        driver: gpu.deckhouse.io
        parameters:
          apiVersion: gpu.deckhouse.io/v1alpha1
          kind: GpuConfig
          sharing:
            strategy: TimeSlicing
            timeSlicing: {interval: Short}

A claim whose containers need only CUDA and NVML (no graphics, video or display library)::

    config:
    - opaque:
        driver: gpu.deckhouse.io
        parameters:
          apiVersion: gpu.deckhouse.io/v1alpha1
          kind: GpuConfig
          driverCapabilities: [compute, utility]
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel, Field, ValidationError

from api.gpu.v1alpha1.common import API_VERSION, ApiModel
from api.gpu.v1alpha1.gpuclass import DriverCapability, Sharing

KIND: Final = "GpuConfig"


class GpuConfig(ApiModel):
    """Settings of the devices a request gets; every field is optional."""

    api_version: Literal["gpu.deckhouse.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["GpuConfig"]
    sharing: Sharing | None = Field(default=None, description="How shared devices are shared.")
    driver_capabilities: list[DriverCapability] | None = Field(
        default=None,
        min_length=1,
        description="The NVIDIA driver capabilities the devices' containers get; unset: the node's "
        "default (gpu-handler --driver-capabilities).",
    )


class GpuConfigError(ValueError):
    """Opaque parameters that are not a valid GpuConfig; the message names the field."""


def parse_gpu_config(raw: Any) -> GpuConfig:
    """Decodes opaque parameters strictly: unknown fields and wrong types are errors."""
    if not isinstance(raw, dict):
        raise GpuConfigError(f"parameters must be an object with apiVersion {API_VERSION} and kind {KIND}")
    unknown = _unknown_fields(GpuConfig, raw, "")
    if unknown:
        raise GpuConfigError(f"unknown field(s) {', '.join(unknown)}")
    try:
        # Strict, in JSON mode: "50" is not an integer, but enum values arrive as their strings.
        return GpuConfig.model_validate_json(json.dumps(raw), strict=True)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '(root)'}: {error['msg']}" for error in exc.errors()
        )
        raise GpuConfigError(problems) from None


def _unknown_fields(model: type[BaseModel], data: dict[str, Any], prefix: str) -> list[str]:
    """Paths of keys in ``data`` that ``model`` (and the models nested in it) does not declare."""
    known: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        known[field.alias or name] = field.annotation
    found = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in known:
            found.append(path)
            continue
        nested = _model_in(known[key])
        if nested is not None and isinstance(value, dict):
            found += _unknown_fields(nested, value, f"{path}.")
    return found


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class of ``X``, ``X | None`` or ``Optional[X]``, if it is one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None
