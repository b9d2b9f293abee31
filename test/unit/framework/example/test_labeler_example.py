"""The from-scratch controller of docs/framework.md runs as written: a handler file and a setup file.

The docs quote ``labeler_handlers.py`` and ``labeler_setup.py`` verbatim (checked below), so the
example a newcomer copies is one the test suite runs.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes.client import V1ObjectMeta
from pytest_mock import MockerFixture
from testutil.unit.framework.example.labeler_handlers import LABEL, SeenLabelHandler
from testutil.unit.framework.example.labeler_setup import LabelerContainer, setup_labeler

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient, PatchType
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Request, Result

ROOT = Path(__file__).resolve().parents[4]
DOCS = ROOT / "docs" / "framework.md"
EXAMPLE = ROOT / "test" / "testutil" / "unit" / "framework" / "example"


def test_the_labeler_labels_a_cached_gpu_with_one_guarded_patch(mocker: MockerFixture) -> None:
    gpu = PhysicalGPU(metadata=V1ObjectMeta(name="node-1-0-10de-20b7", resource_version="7", generation=1))
    client = mocker.MagicMock(spec=KubeClient)
    client.patch.side_effect = lambda kind, name, ops, **kw: gpu
    container = LabelerContainer(client=client, informers=InformerFactory(client))
    manager = Manager()
    controller = setup_labeler(manager, container)
    container.gpus().store.add(gpu)
    assert container.reconciler().reconcile(Request("node-1-0-10de-20b7")) == Result()
    kind, name, ops = client.patch.call_args.args
    assert (kind.kind, name, client.patch.call_args.kwargs["patch_type"]) == (
        "PhysicalGPU",
        "node-1-0-10de-20b7",
        PatchType.JSON,
    )
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    assert {"op": "add", "path": "/metadata/labels", "value": {LABEL: "true"}} in ops
    assert manager._runnables == [controller]


def test_the_handler_can_be_overridden_in_the_real_container(mocker: MockerFixture) -> None:
    from dependency_injector import providers

    container = LabelerContainer(
        client=mocker.MagicMock(spec=KubeClient), informers=mocker.MagicMock(spec=InformerFactory)
    )
    fake = mocker.MagicMock(spec=SeenLabelHandler)
    container.handlers.override(providers.Object([fake]))
    assert container.handlers() == [fake]


def test_the_docs_quote_the_example_verbatim() -> None:
    docs = DOCS.read_text()
    for name in ("labeler_handlers.py", "labeler_setup.py"):
        assert (EXAMPLE / name).read_text() in docs, f"docs/framework.md does not quote {name} as it is"
