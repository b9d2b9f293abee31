"""Hostile inputs as the real API server (kube-apiserver 1.37; 1.34 words a duplicate request
otherwise) judges them, and as we judge them.

Our limits and messages must line up with the API server's, so each case is put to
both:

* **selectors**: the same hostile expressions go into a DeviceClass (a server-side dry run) and
  into our CEL environment; the verdicts agree, except where we refuse a selector the server
  admits because it would build an oversized string or list (documented in docs/allocator.md);
* **claims**: claims the server refuses are refused in the bundle with the server's own message,
  and claims it admits (a count of 0, no spec at all) are admitted by both;
* **quantities**: the server stores ``1e999999`` in a ResourceSlice of any driver; read back from
  the server, that pool is skipped and reported while the good pool still serves a claim;
* **withdrawal**: the server's answer to a JSON patch that no longer applies (the block already
  gone, the object replaced) is a 422 without causes, which the status writer takes for "nothing
  to withdraw" — while a 422 with causes (see the unit test) is raised.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import ResourceV1ResourceClaim, V1ObjectMeta
from pydantic import ValidationError
from testutil.k8s_fields import allocation_results, name_of, present

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.dra.allocator import Allocator, CelEnvironment, Unschedulable
from pkg.dra.allocator.pools import gather_pools
from pkg.dra.explain.claim_validation import claim_errors
from pkg.framework.client import ApiError, InvalidError, KubeClient, PatchType
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.gpuhandler.enrichment.status_writer import KubeStatusWriter

pytestmark = [pytest.mark.integration, pytest.mark.dra_api]

ENV = CelEnvironment()
REPLACE = '.replace("a", "aaaaaaaaaaaaaaaa")'
TEN = "[1,2,3,4,5,6,7,8,9,10]"


def doubling(start: str, steps: int) -> str:
    binds = "".join(f"cel.bind(v{i + 1}, v{i} + v{i}, " for i in range(steps))
    return f"cel.bind(v0, {start}, {binds}v{steps}.size() > 0" + ")" * (steps + 1)


SELECTORS = [
    *("device.driver" + REPLACE * n + ".size() > 0" for n in (1, 3, 4, 6, 8)),
    doubling("device.driver", 12),
    doubling("device.driver", 17),
    doubling("device.driver", 20),
    "(" * 40 + "true" + ")" * 40,
    'quantity("1Gi") == quantity("1073741824")',
    'semver("1.0.0") == semver("1.0.0")',
    'sign(quantity("-2")) == -1',
    'quantity("1").sign() == 1',  # sign is a global function in Kubernetes
    f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, true)))",
    "device.attributes.all(d, device.attributes[d].all(n, device.attributes[d][n] == 1))",
    "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, "
    "device.attributes.all(d, true))))",
    'device.driver.split("").join(device.driver).size() > 1',
    '[device.driver, device.driver].join(",").size() > 0',
    '"%s".format([device.driver]) == "x"',
    'device.driver.matches("^a+$")',
    '"x" + 1 == "x1"',
    "1",
    'device.attributes["gpu.deckhouse.io"].deviceType == "MIG" && '
    'device.capacity["gpu.deckhouse.io"].memory.compareTo(quantity("10Gi")) >= 0',
]
# The documented differences: we also bound the sizes of what a selector builds, and the engine's
# parser nests at most 32 levels (cel-go's far more); the server admits such selectors.
_OURS_ONLY = ("builds a string of up to", "builds a list of up to", "recursion")


def _server_verdict(kube: KubeClient, obj: dict[str, Any], namespace: str | None = None) -> str | None:
    """The server's error for creating ``obj`` (a dry run: nothing is stored), or None."""
    kind = DEVICE_CLASS if obj["kind"] == "DeviceClass" else RESOURCE_CLAIM
    try:
        kube.raw("POST", kind.collection_path(namespace) + "?dryRun=All", body=obj)
    except ApiError as err:
        return err.message
    return None


@pytest.mark.parametrize("expression", SELECTORS)
def test_the_api_server_and_our_cel_environment_agree_on_selectors(kube: KubeClient, expression: str) -> None:
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "hostile-probe"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }
    server = _server_verdict(kube, device_class)
    ours = ENV.compile(expression).error
    if ours is not None and any(reason in ours for reason in _OURS_ONLY):
        assert server is None
        return
    assert (ours is None) == (server is None), (server, ours)
    if server is not None and "exceeds cost limit" in server:
        assert ours is not None
        assert "too complex, exceeds cost limit" in ours


REQUESTS: list[Any] = [
    [{"name": "r", "exactly": {"deviceClassName": "x", "count": -1}}],
    [{"name": "r", "exactly": {"deviceClassName": "x", "allocationMode": "All", "count": 2}}],
    [{"name": "r", "exactly": {"deviceClassName": "x", "allocationMode": "Some"}}],
    [{"name": "r", "exactly": {}}],
    [{"name": "r"}],
    [{"name": "R_1", "exactly": {"deviceClassName": "x"}}],
    [{"name": "r", "exactly": {"deviceClassName": "x"}}, {"name": "r", "exactly": {"deviceClassName": "x"}}],
    [{"name": f"r{i}", "exactly": {"deviceClassName": "x"}} for i in range(33)],
    [{"name": "r", "firstAvailable": [{"name": "s", "deviceClassName": "x", "count": -4}]}],
    [{"name": "r", "firstAvailable": [{"name": f"s{i}", "deviceClassName": "x"} for i in range(9)]}],
    # admitted by the server (an unset or zero count defaults to 1; a claim may ask for nothing)
    [{"name": "r", "exactly": {"deviceClassName": "x", "count": 0}}],
    [{"name": "r", "firstAvailable": [{"name": "s", "deviceClassName": "x", "count": 0}]}],
    [{"name": "r", "exactly": {"deviceClassName": "x", "count": 33}}],
    None,
]


@pytest.mark.parametrize("requests", REQUESTS)
def test_bundle_claims_are_judged_by_the_api_servers_rules_in_its_words(
    kube: KubeClient, namespace: str, requests: Any
) -> None:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": namespace},
    }
    if requests is not None:
        obj["spec"] = {"devices": {"requests": requests}}
    server = _server_verdict(kube, obj, namespace)
    try:
        ours = claim_errors(RESOURCE_CLAIM.decode(obj))
    except ValidationError:  # the client's model already refuses it (a bundle says so in its words)
        assert server is not None
        return
    assert bool(ours) == (server is not None), (server, ours)
    for message in ours:
        assert server is not None
        if "Duplicate" not in message:
            assert message in server, (server, message)
            continue
        # Ours names a duplicate request by its name. 1.37 prints it whole at the request's path
        # (``requests[1]: Duplicate value: {...}``), 1.34 prints its name at the name's path
        # (``requests[1].name: Duplicate value: "r"``).
        path = message.split(": Duplicate value: ")[0]
        wordings = (f"{path}: Duplicate value: ", f"{path}.name: Duplicate value: ")
        assert any(wording in server for wording in wordings), (server, message)


def _slice(name: str, driver: str, capacity: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": "hostile-node",
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "d0", "capacity": {"memory": {"value": capacity}}}],
        },
    }


def test_a_pool_the_server_stored_with_an_absurd_quantity_is_skipped_and_reported(
    kube: KubeClient, unique: str
) -> None:
    good, bad = f"good-{unique}", f"bad-{unique}"
    created = []
    try:
        for obj in (_slice(good, "gpu.deckhouse.io", "24Gi"), _slice(bad, "other.example.com", "1e999999")):
            created.append(kube.create(RESOURCE_SLICE, RESOURCE_SLICE.decode(obj)))  # the server admits both
        slices = [s for s in kube.list(RESOURCE_SLICE)[0] if name_of(s) in (good, bad)]
        pools = {p.id.pool: p for p in gather_pools(slices, node=None)}
        assert pools[good].usable
        assert pools[bad].invalid is not None
        assert "larger than the maximum" in present(pools[bad].invalid)
        device_class = DEVICE_CLASS.decode(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": f"gpu-{unique}"},
                "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.deckhouse.io"'}}]},
            }
        )
        claim = ResourceV1ResourceClaim.model_validate(
            {
                "metadata": {"name": "c", "namespace": "default", "uid": "u"},
                "spec": {
                    "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": f"gpu-{unique}"}}]}
                },
            }
        )
        outcome = Allocator().allocate(claim, slices=slices, classes=[device_class], allocated_claims=[])
        assert not isinstance(outcome, Unschedulable), outcome
        assert [r.pool for r in allocation_results(outcome)] == [good]
    finally:
        for rs in created:
            kube.delete(RESOURCE_SLICE, name_of(rs))


def test_a_withdrawal_that_no_longer_applies_is_nothing_to_withdraw(kube: KubeClient, unique: str) -> None:
    name = f"hostile-{unique}"
    handler = KubeClient(kube.api_client, field_manager="gpu-handler")
    gpu = kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name)))
    try:
        kube.patch(
            PHYSICAL_GPU,
            name,
            {"status": {"currentState": {"driverType": "Nvidia"}}},
            patch_type=PatchType.MERGE,
            subresource="status",
        )
        writer = KubeStatusWriter(handler)
        assert writer.withdraw_nvidia(gpu) is None  # the block is not there
        stale = gpu.model_copy(update={"metadata": gpu.metadata.model_copy(update={"uid": "replaced"})})
        assert writer.withdraw_nvidia(stale) is None  # the test of the uid fails
        with pytest.raises(InvalidError) as raised:
            handler.patch(
                PHYSICAL_GPU,
                name,
                [{"op": "remove", "path": "/status/currentState/nvidia"}],
                patch_type=PatchType.JSON,
                subresource="status",
            )
        assert not raised.value.details.get("causes")  # what the writer relies on
    finally:
        kube.delete(PHYSICAL_GPU, name)


def test_an_amd_block_is_withdrawn_and_then_nothing_is_left_to_withdraw(
    kube: KubeClient, unique: str
) -> None:
    """currentState.amd goes the way currentState.nvidia does: a guarded JSON patch, and once it is
    gone a second withdrawal is nothing to withdraw."""
    name = f"hostile-amd-{unique}"
    handler = KubeClient(kube.api_client, field_manager="gpu-handler")
    gpu = kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name)))
    try:
        kube.patch(
            PHYSICAL_GPU,
            name,
            {"status": {"currentState": {"driverType": "ROCm", "amd": {"computePartitionMode": "cpx"}}}},
            patch_type=PatchType.MERGE,
            subresource="status",
        )
        writer = KubeStatusWriter(handler)
        withdrawn = writer.withdraw_amd(gpu)
        assert withdrawn is not None
        assert withdrawn.status is not None
        assert withdrawn.status.current_state is not None
        assert withdrawn.status.current_state.amd is None
        assert withdrawn.status.current_state.driver_type is DriverType.ROCM  # the node agent's, kept
        assert writer.withdraw_amd(gpu) is None
    finally:
        kube.delete(PHYSICAL_GPU, name)
