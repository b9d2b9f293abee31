"""``kubectl gpu explain`` over what the user may read: the slices and classes are required (a
refusal names the read and the chart role that grants it), other namespaces' claims and the
Namespace are not (the answer says what it could not count)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from testutil.unit.app.kubectlgpu.kubectl_gpu_objects import DRIVER

from api.gpu.v1alpha1 import ExplanationOutcome, ExplanationStrategy
from pkg.app.kubectlgpu import cli
from pkg.app.kubectlgpu import explain as explain_module
from pkg.app.kubectlgpu.access import ForbiddenError, PluginError, Reader, resource_name
from pkg.app.kubectlgpu.explain import explain
from pkg.dra.explain.request import Answer, NotServedError
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


# -- asked of gpu-dra-controller, or computed here --------------------------------------------------


def _cli(monkeypatch: pytest.MonkeyPatch, answer: Any, *argv: str) -> tuple[int, str, str]:
    """``kubectl gpu explain pending -n ml ARGV`` with the controller's answer (or refusal) faked."""
    asked: list[Any] = []

    def ask(client: Any, claim: Any, spec: Any, *, timeout: float) -> Any:
        asked.append((claim.metadata.name, spec, timeout))
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(explain_module, "ask", ask)
    args = cli.parser().parse_args(["explain", "pending", "-n", "ml", *argv])
    out, err = io.StringIO(), io.StringIO()
    reader = FakeReader(set())
    monkeypatch.setattr(FakeReader, "client", None, raising=False)
    code = cli._explain(reader, args, "ml", out, err)
    _cli.asked = asked  # type: ignore[attr-defined]
    return code, out.getvalue(), err.getvalue()


def test_the_controllers_answer_is_printed_with_its_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = Answer(
        outcome=ExplanationOutcome.NOT_ALLOCATABLE, report="claim ml/pending (strategy first-fit)\n"
    )
    code, out, err = _cli(monkeypatch, answer, "--strategy", "first-fit", "--timeout", "3")
    assert (code, out, err) == (5, "claim ml/pending (strategy first-fit)\n", "")
    [(name, spec, timeout)] = _cli.asked  # type: ignore[attr-defined]
    assert (name, spec.strategy, spec.max_devices, timeout) == (
        "pending",
        ExplanationStrategy.FIRST_FIT,
        40,
        3.0,
    )


def test_without_an_answer_it_warns_and_computes_here(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _cli(monkeypatch, NotServedError("gpu-dra-controller did not answer in time"))
    assert code == 5  # card-a is mine-held's, card-b theirs: as computed locally
    local = explain(
        FakeReader(set()),
        namespace="ml",
        name="pending",
        node=None,
        first_fit=False,
        show_all=False,
        max_devices=40,
    )
    assert out == local.report.text
    assert (
        err == "warning: gpu-dra-controller did not answer in time; computing the explanation here (slower)\n"
    )


def test_when_computing_here_fails_the_warning_why_the_controller_was_not_asked_comes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(client: Any, claim: Any, spec: Any, *, timeout: float) -> Any:
        raise NotServedError("forbidden: you cannot create claimexplanations.gpu.deckhouse.io")

    monkeypatch.setattr(explain_module, "ask", refuse)
    monkeypatch.setattr(FakeReader, "client", None, raising=False)
    args = cli.parser().parse_args(["explain", "pending", "-n", "ml"])
    out, err = io.StringIO(), io.StringIO()
    denied = FakeReader({("list", "resourceslices.resource.k8s.io", None)})
    with pytest.raises(ForbiddenError, match="resourceslices"):
        cli._explain(denied, args, "ml", out, err)
    assert err.getvalue() == (
        "warning: forbidden: you cannot create claimexplanations.gpu.deckhouse.io; "
        "computing the explanation here (slower)\n"
    )
    assert out.getvalue() == ""


def test_local_does_not_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _cli(monkeypatch, AssertionError("asked"), "--local")
    assert code == 5
    assert out.startswith("claim ml/pending (strategy best-fit)")
    assert err == ""
    assert _cli.asked == []  # type: ignore[attr-defined]


def test_an_error_answer_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = Answer(outcome=ExplanationOutcome.ERROR, report="", reason="node ghost not found")
    with pytest.raises(PluginError, match="node ghost not found"):
        _cli(monkeypatch, answer, "--node", "ghost")
