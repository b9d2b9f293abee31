"""gpu-handler started over hostile node state on a real node keeps serving.

The node gets, just before gpu-handler restarts: a checkpoint entry of a card the
backend cannot see (an unfinished prepare of a MIG device on a PCI address the node does not
have), a folder where a claim's CDI spec goes, and a file where the VM metadata folder goes. The
restarted gpu-handler must register its plugin with the real kubelet, keep its ResourceSlices
published, stay up (no crash loop), and say what it left for later; the node is put back after.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from testutil.e2e.gpu_nodes import normal_handler, restart_handler

from pkg.devcluster.gpucomponents import GpuComponents
from pkg.domain.names import DRIVER
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointStore,
    ClaimRecord,
    DeviceRecord,
    PreparePhase,
    read_boot_id,
)
from pkg.gpuhandler.preparation.kinds.mig import MigRecord
from pkg.gpuhandler.preparation.setup import RECORD_TYPES

UNSEEN = "0000:99:00.0"  # no such card on the node


@pytest.fixture
def handler(gpu_node: GpuComponents) -> Iterator[GpuComponents]:
    yield from normal_handler(gpu_node)


def _store(components: GpuComponents) -> CheckpointStore:
    path = components.node.kubelet.paths.root / "plugins" / DRIVER / "checkpoint.json"
    return CheckpointStore(path, boot_id=read_boot_id, records=RECORD_TYPES)


def _slices(kube: KubeClient, node: str) -> list[str]:
    items, _ = kube.list(RESOURCE_SLICE)
    return [
        str(s.metadata.name)
        for s in items
        if s.spec is not None and s.spec.node_name == node and s.spec.driver == DRIVER and s.metadata
    ]


def test_gpu_handler_started_over_hostile_state_stays_registered_and_published(
    kube: KubeClient, handler: GpuComponents
) -> None:
    node = handler.node
    assert _slices(kube, node.name), "the node publishes slices before the test"
    store = _store(handler)
    uid = str(uuid.uuid4())
    spec_folder = node.cdi_dir / f"k8s.gpu.deckhouse.io-claim_{uuid.uuid4()}.json"
    vm_dir: Path = store.file.path.parent / "vm"
    vm_was_folder = vm_dir.is_dir()
    try:
        data = store.load()
        data.claims[uid] = ClaimRecord(
            uid=uid,
            namespace="e2e",
            name="hostile",
            state=PreparePhase.PREPARE_STARTED,
            devices=[
                DeviceRecord(
                    pool=f"gpus/{node.name}",
                    device="gpu-0000-99-00-0-mig-14-0",
                    requests=["gpu"],
                    card=UNSEEN,
                    device_type="MIG",
                    mig=MigRecord(profile_id=14, placement_start=0, placement_size=1),
                )
            ],
            updated=datetime.now(UTC),
        )
        store.save(data)
        spec_folder.mkdir()
        (spec_folder / "inside").write_text("someone else's")
        if not vm_was_folder:
            vm_dir.write_text("a file where the VM metadata folder goes")

        since = handler.handler_log_size()
        restart_handler(handler)  # waits until the kubelet registered the plugin

        time.sleep(15)  # a health round and a start-up retry later
        assert handler.handler.running(), handler.handler.tail(40)
        log = handler._handler_log()[since:]
        assert "start-up step roll-back failed" in log
        assert "orphan-cdi-specs" in log
        assert _slices(kube, node.name)
        assert uid in store.load().claims  # kept: it is the only memory of what to give back
    finally:
        data = store.load()
        data.claims.pop(uid, None)
        store.save(data)
        shutil.rmtree(spec_folder, ignore_errors=True)
        if not vm_was_folder and vm_dir.is_file():
            vm_dir.unlink()
        restart_handler(handler)


def test_gpu_handler_started_over_an_unreadable_checkpoint_stays_registered_and_changes_nothing(
    kube: KubeClient, handler: GpuComponents
) -> None:
    """A link planted at the checkpoint path (dangling: read as "no checkpoint", start-up would
    sweep every running claim's devices as orphans): refused, nothing swept, the plugin serves."""
    node = handler.node
    store = _store(handler)
    path = store.file.path
    saved = path.read_bytes() if path.exists() else None
    specs = sorted(p.name for p in node.cdi_dir.iterdir())
    try:
        if saved is not None:
            path.unlink()
        path.symlink_to(path.parent / "nowhere.json")

        since = handler.handler_log_size()
        restart_handler(handler)  # waits until the kubelet registered the plugin

        time.sleep(15)  # a health round and a start-up retry later
        assert handler.handler.running(), handler.handler.tail(40)
        log = handler._handler_log()[since:]
        assert "start-up reconciliation skipped" in log
        assert str(path) in log  # the refusal names the file
        assert _slices(kube, node.name)
        assert path.is_symlink()  # left for a person to look at, not replaced
        assert sorted(p.name for p in node.cdi_dir.iterdir()) == specs  # nothing swept unknowing
    finally:
        if path.is_symlink():
            path.unlink()
        if saved is not None:
            path.write_bytes(saved)
        restart_handler(handler)
