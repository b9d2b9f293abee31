"""``kubectl gpu explain`` over what the user may read: the slices and classes are required (a
refusal names the read and the chart role that grants it), other namespaces' claims and the
Namespace are not (the answer says what it could not count)."""

from __future__ import annotations

from typing import Any

import pytest
from kubectl_gpu_objects import DRIVER

from pkg.app.kubectlgpu.access import ForbiddenError, Reader, resource_name
from pkg.app.kubectlgpu.explain import explain
from pkg.framework.client import ResourceKind
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NAMESPACE, RESOURCE_CLAIM, RESOURCE_SLICE

CLASS = "gpu"


def _claim(namespace: str, name: str, device: str | None) -> Any:
    raw: dict[str, Any] = {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
    }
    if device:
        raw["status"] = {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": "gpus/w1", "device": device}]
                }
            }
        }
    return RESOURCE_CLAIM.decode(raw)


SLICE = RESOURCE_SLICE.decode(
    {
        "metadata": {"name": "w1"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "w1",
            "pool": {"name": "gpus/w1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "card-a"}, {"name": "card-b"}],
        },
    }
)
DEVICE_CLASS_OBJ = DEVICE_CLASS.decode(
    {
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
)
MINE = _claim("ml", "pending", None)
OTHERS = [_claim("ml", "mine-held", "card-a"), _claim("web", "theirs", "card-b")]


class FakeReader(Reader):
    """Answers from fixed objects; ``denied`` holds (verb, resource, namespace or None) refused."""

    def __init__(self, denied: set[tuple[str, str, str | None]]):
        self.denied = denied

    def _check(self, verb: str, kind: ResourceKind[Any], namespace: str | None) -> None:
        if (verb, resource_name(kind), namespace) in self.denied:
            raise ForbiddenError(verb=verb, resource=resource_name(kind), namespace=namespace)

    def get(self, kind: ResourceKind[Any], name: str, namespace: str | None = None) -> Any:
        self._check("get", kind, namespace)
        if kind is RESOURCE_CLAIM:
            return MINE
        assert kind is NAMESPACE
        return NAMESPACE.decode({"metadata": {"name": name}})

    def list_all(self, kind: ResourceKind[Any], namespace: str | None = None) -> list[Any]:
        self._check("list", kind, namespace)
        everything: dict[str, list[Any]] = {
            RESOURCE_SLICE.kind: [SLICE],
            DEVICE_CLASS.kind: [DEVICE_CLASS_OBJ],
            RESOURCE_CLAIM.kind: [MINE, *OTHERS],
        }
        objects = everything[kind.kind]
        return [o for o in objects if namespace is None or o.metadata.namespace == namespace]

    def resource_slices(self) -> list[Any]:  # the real one reads through pkg.dra.explain.slice_reader
        return self.list_all(RESOURCE_SLICE)


def run(denied: set[tuple[str, str, str | None]]) -> Any:
    return explain(
        FakeReader(denied),
        namespace="ml",
        name="pending",
        node=None,
        first_fit=True,
        show_all=False,
        max_devices=40,
    )


def test_with_every_read_other_namespaces_allocations_count() -> None:
    result = run(set())
    assert result.caveats == []
    assert not result.report.allocatable  # card-a is mine-held's, card-b theirs


def test_without_other_namespaces_claims_it_answers_and_says_what_it_missed() -> None:
    result = run({("list", "resourceclaims.resource.k8s.io", None), ("get", "namespaces", None)})
    assert result.report.allocatable  # theirs was not readable: card-b looks free
    assert "card-b" in result.report.text
    (caveat,) = result.caveats  # the Namespace matters only for admin access, which is not asked
    assert caveat.startswith("forbidden: you cannot list resourceclaims.resource.k8s.io at the cluster scope")
    assert "may be shown as free" in caveat


@pytest.mark.parametrize("resource", ["resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io"])
def test_without_slices_or_classes_it_refuses_naming_the_read_and_the_role(resource: str) -> None:
    with pytest.raises(ForbiddenError) as refused:
        run({("list", resource, None)})
    assert str(refused.value).startswith(f"forbidden: you cannot list {resource} at the cluster scope")
    assert "gpuViewer" in str(refused.value)
    assert refused.value.exit_code == 4
