"""Step 6, template: the ResourceClaimTemplate of ``spec.channel.resourceClaimTemplate.name``.

A template of that name the domain does not own (a job's own, or one left by a deleted domain the
garbage collector has not removed yet) is never taken over: the domain reports it and waits.
"""

from __future__ import annotations

from kubernetes.client import V1ResourceClaimTemplate

from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM_TEMPLATE
from pkg.framework.reconcile.contract import Result
from pkg.framework.reconcile.owner_references import controller_of
from pkg.gpucontroller.computedomain.internal.meta import meta
from pkg.gpucontroller.computedomain.internal.service import ComputeDomainApi
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import REASON_TEMPLATE_TAKEN, not_ready
from pkg.gpucontroller.computedomain.render import claim_template


class TemplateHandler:
    name = "template"

    def __init__(self, *, api: ComputeDomainApi) -> None:
        self._api = api

    def handle(self, state: ComputeDomainState) -> Result | None:
        channel, clique = state.status.channel, state.clique
        if channel is None or clique is None:
            raise RuntimeError(f"ComputeDomain {state.name}: template step before channel and clique")
        existing = state.template
        if existing is not None and not _owned(existing, str(state.domain.metadata.uid)):
            name = f"{state.domain.metadata.namespace}/{meta(existing).name}"
            raise not_ready(
                state,
                reason=REASON_TEMPLATE_TAKEN,
                message=f"ResourceClaimTemplate {name} exists and does not belong to this domain; it is "
                "left alone: delete it or name another template in spec.channel.resourceClaimTemplate",
            )
        desired = claim_template(state.domain, channel=channel, clique=clique)
        if existing is None or _spec(existing) != _spec(desired):
            self._api.apply_template(desired)
        return None


def _owned(template: V1ResourceClaimTemplate, uid: str) -> bool:
    owner = controller_of(meta(template))
    return owner is not None and owner.uid == uid


def _spec(template: V1ResourceClaimTemplate) -> object:
    return RESOURCE_CLAIM_TEMPLATE.encode(template).get("spec")
