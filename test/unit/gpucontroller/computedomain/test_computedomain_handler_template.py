"""The template step: the claim template's shape, ownership, and no rewrite when unchanged."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes.client import V1ObjectMeta, V1ResourceClaimTemplate
from testutil.compute_domains import CLIQUE_A, RecordingApi

from api.gpu.v1alpha1 import ComputeDomain
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM_TEMPLATE
from pkg.gpucontroller.computedomain.internal.handler.template import TemplateHandler
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import NotReadyYetError

StateOf = Callable[..., ComputeDomainState]
DomainOf = Callable[..., ComputeDomain]


def ready_state(make: StateOf, domain: ComputeDomain, **fields: object) -> ComputeDomainState:
    made = make(domain, **fields)
    made.status.channel = 3
    made.clique = CLIQUE_A
    return made


def test_the_template_selects_the_channel_in_the_clique_with_the_domain_config(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    TemplateHandler(api=api).handle(ready_state(state, domain()))
    [template] = api.made("apply_template")
    body = RESOURCE_CLAIM_TEMPLATE.encode(template)
    assert body["metadata"]["name"] == "job-channel"
    assert body["metadata"]["namespace"] == "team"
    assert body["metadata"]["ownerReferences"][0]["kind"] == "ComputeDomain"
    devices = body["spec"]["spec"]["devices"]
    [channel] = devices["requests"]
    assert channel["name"] == "channel"
    assert channel["exactly"]["deviceClassName"] == "imex-channel.gpu.deckhouse.io"
    assert channel["exactly"]["count"] == 1
    expression = channel["exactly"]["selectors"][0]["cel"]["expression"]
    assert 'device.attributes["gpu.deckhouse.io"].imexChannel == 3' in expression
    assert f'device.attributes["gpu.deckhouse.io"].nvlinkDomain == "{CLIQUE_A}"' in expression
    [config] = devices["config"]
    assert config["requests"] == ["channel"]
    assert config["opaque"]["parameters"]["kind"] == "ComputeDomainChannelConfig"
    assert config["opaque"]["parameters"]["domainUID"] == template.metadata.owner_references[0].uid
    assert "constraints" not in devices


def test_spec_devices_adds_gpus_constrained_to_the_same_clique(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    with_gpus = domain(devices={"deviceClassName": "gpu-b200", "count": 2})
    TemplateHandler(api=api).handle(ready_state(state, with_gpus))
    devices = RESOURCE_CLAIM_TEMPLATE.encode(api.made("apply_template")[0])["spec"]["spec"]["devices"]
    gpus = devices["requests"][1]
    assert (gpus["name"], gpus["exactly"]["deviceClassName"], gpus["exactly"]["count"]) == (
        "gpus",
        "gpu-b200",
        2,
    )
    assert devices["constraints"] == [
        {"requests": ["channel", "gpus"], "matchAttribute": "gpu.deckhouse.io/nvlinkDomain"}
    ]


def test_a_template_of_that_name_the_domain_does_not_own_is_left_alone(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    foreign = V1ResourceClaimTemplate(metadata=V1ObjectMeta(name="job-channel", namespace="team"))
    taken = ready_state(state, domain(), template=foreign)
    with pytest.raises(NotReadyYetError):
        TemplateHandler(api=api).handle(taken)
    [condition] = taken.status.conditions or []
    assert condition.reason == "ResourceClaimTemplateTaken"
    assert "team/job-channel" in str(condition.message)
    assert api.made("apply_template") == []


def test_an_unchanged_owned_template_is_not_written_again(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    TemplateHandler(api=api).handle(ready_state(state, domain()))
    [written] = api.made("apply_template")
    TemplateHandler(api=api).handle(ready_state(state, domain(), template=written))
    assert len(api.made("apply_template")) == 1
