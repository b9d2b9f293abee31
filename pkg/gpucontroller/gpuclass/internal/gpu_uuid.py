"""A card's UUID as a GPUClass's selector names it: the state lists it, the PhysicalGPU watch
wakes on its change."""

from __future__ import annotations

from api.gpu.v1alpha1 import PhysicalGPU


def gpu_uuid(gpu: PhysicalGPU | None) -> str | None:
    state = gpu.status.current_state if gpu is not None and gpu.status else None
    return state.nvidia.gpu_uuid if state is not None and state.nvidia is not None else None
