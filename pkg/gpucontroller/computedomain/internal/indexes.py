"""Store indexes the compute-domain controller reads, declared with the manager by its setup.

* :data:`CLAIM_BY_DOMAIN_INDEX` (ResourceClaims): the claims whose channel config names a domain,
  by ``<namespace>/<domain>``: a domain's members without scanning every claim.
* :data:`DOMAIN_BY_TEMPLATE_INDEX` (ComputeDomains): domains by the template they name
  (``<namespace>/<template>``): a foreign template that goes away wakes the domain waiting for it.

The domains by clique (what an ensemble's change wakes) is the ensemble controller's
:data:`pkg.gpucontroller.imexensemble.indexes.DOMAIN_BY_CLIQUE`, declared by both setups.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import ResourceV1ResourceClaim

from api.gpu.v1alpha1 import ComputeDomain
from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.cache.indexer import Index
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.gpucontroller.computedomain.internal.membership import spec_channel_config
from pkg.gpucontroller.computedomain.internal.meta import meta

CLAIM_BY_DOMAIN = "claim-by-compute-domain"
DOMAIN_BY_TEMPLATE = "compute-domain-by-template"


def claim_domains(claim: ResourceV1ResourceClaim) -> list[str]:
    config = spec_channel_config(claim)
    return [f"{meta(claim).namespace}/{config.domain}"] if config is not None else []


def domain_templates(domain: ComputeDomain) -> list[str]:
    return [f"{domain.metadata.namespace}/{domain.spec.channel.resource_claim_template.name}"]


CLAIM_BY_DOMAIN_INDEX: Index[ResourceV1ResourceClaim] = Index(
    name=CLAIM_BY_DOMAIN, kind=RESOURCE_CLAIM, func=claim_domains
)
DOMAIN_BY_TEMPLATE_INDEX: Index[ComputeDomain] = Index(
    name=DOMAIN_BY_TEMPLATE, kind=COMPUTE_DOMAIN, func=domain_templates
)
INDEXES: tuple[Index[Any], ...] = (
    CLAIM_BY_DOMAIN_INDEX,
    DOMAIN_BY_TEMPLATE_INDEX,
)
