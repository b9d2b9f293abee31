"""The project's own kinds (CRDs), declared once each over their ``api/`` models.

Built-in kinds (Node, Pod, ResourceSlice, ...) live in :mod:`pkg.framework.client.builtin_kinds`;
these are the kinds only this project defines, which is why they live above the framework.
"""

from __future__ import annotations

from api.gpu.v1alpha1 import ClaimExplanation, ComputeDomain, GPUClass, PhysicalGPU
from pkg.framework.client.kinds import ResourceKind

PHYSICAL_GPU = ResourceKind(
    group="gpu.deckhouse.io",
    version="v1alpha1",
    kind="PhysicalGPU",
    plural="physicalgpus",
    namespaced=False,
    model=PhysicalGPU,
)
GPU_CLASS = ResourceKind(
    group="gpu.deckhouse.io",
    version="v1alpha1",
    kind="GPUClass",
    plural="gpuclasses",
    namespaced=False,
    model=GPUClass,
)
CLAIM_EXPLANATION = ResourceKind(
    group="gpu.deckhouse.io",
    version="v1alpha1",
    kind="ClaimExplanation",
    plural="claimexplanations",
    namespaced=True,
    model=ClaimExplanation,
)
COMPUTE_DOMAIN = ResourceKind(
    group="gpu.deckhouse.io",
    version="v1alpha1",
    kind="ComputeDomain",
    plural="computedomains",
    namespaced=True,
    model=ComputeDomain,
)
