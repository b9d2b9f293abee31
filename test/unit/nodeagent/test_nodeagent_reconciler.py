"""The sync reconciler: the whole chain over fixture hosts, change detection, errors and metrics."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from testutil.unit.nodeagent.nodeagent_fakes import NODE, SYSFS, RecordingWriter, sync_state

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends import VendorRegistry
from pkg.framework.client import ApiError
from pkg.framework.reconcile.handler import Handler
from pkg.hardware.pciids import PciIds
from pkg.inventory.host_info import FileHostInfoReader
from pkg.inventory.pci_scanner import SysfsPciScanner
from pkg.nodeagent import metrics
from pkg.nodeagent.internal.handler import ApplyHandler, CleanupHandler, DiscoverHandler, NodeLabelsHandler
from pkg.nodeagent.internal.state import SyncState
from pkg.nodeagent.reconciler import SYNC, CacheLagError, NodeSyncReconciler, SyncFailedError


class _Cluster:
    """The writer's effects kept as "the cache", so consecutive syncs see their own writes."""

    def __init__(self, writer: RecordingWriter) -> None:
        self.writer = writer
        self.objects: dict[str, PhysicalGPU] = {}
        self.node_labels: dict[str, str] = {}

    def state(self) -> SyncState:
        return sync_state(existing=list(self.objects.values()), node_labels=self.node_labels)

    def record(self) -> None:
        for verb, args in self.writer.calls:
            if verb == "create":
                name, labels = args
                self.objects[name] = PhysicalGPU.model_validate(
                    {"metadata": {"name": name, "uid": f"uid-{name}", "labels": labels}}
                )
            elif verb == "apply_status":
                name, status = args
                self.objects[name] = self.objects[name].model_copy(
                    update={"status": PhysicalGPU.model_validate({"status": status}).status}
                )
            elif verb == "delete":
                self.objects.pop(args[0])
            elif verb == "patch_node_labels":
                self.node_labels |= {k: v for k, v in args[1].items() if v is not None}
        self.writer.calls.clear()


def _reconciler(
    root: Path, cluster: _Cluster, vendors: VendorRegistry, pci_ids: PciIds
) -> NodeSyncReconciler:
    writer = cluster.writer
    handlers: list[Handler[SyncState]] = [
        DiscoverHandler(
            scanner=SysfsPciScanner(root),
            host_info=FileHostInfoReader(host_root=root, sysfs_root=root),
            vendors=vendors,
            names=pci_ids,
        ),
        ApplyHandler(writer=writer),
        CleanupHandler(writer=writer),
        NodeLabelsHandler(writer=writer),
    ]
    return NodeSyncReconciler(node_name=NODE, state_factory=cluster.state, handlers=handlers, cache=writer)


def _errors(step: str) -> float:
    return float(metrics.sync_errors.labels(node=NODE, step=step)._value.get())


def test_first_sync_writes_everything_and_the_next_writes_nothing(
    tmp_path: Path, writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds
) -> None:
    root = tmp_path / "host"
    shutil.copytree(SYSFS / "a30-x2", root, symlinks=True)
    cluster = _Cluster(writer)
    reconciler = _reconciler(root, cluster, vendors, pci_ids)

    reconciler.reconcile(SYNC)
    assert writer.verbs() == ["create", "apply_status", "create", "apply_status", "patch_node_labels"]
    assert writer.waits == 1  # a sync that wrote waits for its writes to reach the cache
    cluster.record()
    assert sorted(cluster.objects) == ["node-1-0-10de-20b7", "node-1-1-10de-20b7"]

    reconciler.reconcile(SYNC)
    assert writer.calls == []
    assert writer.waits == 1  # nothing written, nothing to wait for

    # The first card is pulled: exactly its object goes, the other keeps its name.
    (root / "bus/pci/devices/0000:3b:00.0").unlink()
    reconciler.reconcile(SYNC)
    assert writer.calls == [("delete", ("node-1-0-10de-20b7", "uid-node-1-0-10de-20b7"))]
    cluster.record()
    assert sorted(cluster.objects) == ["node-1-1-10de-20b7"]


def test_a_failed_scan_fails_the_sync_before_any_delete(
    tmp_path: Path, writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds
) -> None:
    cluster = _Cluster(writer)
    cluster.objects["node-1-0-10de-20b7"] = PhysicalGPU.model_validate(
        {
            "metadata": {
                "name": "node-1-0-10de-20b7",
                "labels": {
                    "gpu.deckhouse.io/node": NODE,
                    "gpu.deckhouse.io/vendor": "nvidia",
                    "gpu.deckhouse.io/pci-address": "0000-3b-00.0",
                },
            }
        }
    )
    before = _errors("discover")
    with pytest.raises(OSError, match="devices"):
        _reconciler(tmp_path / "not-mounted", cluster, vendors, pci_ids).reconcile(SYNC)
    assert writer.calls == []
    assert _errors("discover") == before + 1


def test_recorded_failures_raise_once_and_count_per_step(
    writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds
) -> None:
    cluster = _Cluster(writer)
    writer.fail_on["create:node-1-0-10de-20b7"] = ApiError(status=500, reason="InternalError", message="etcd")
    writer.fail_on[f"patch_node_labels:{NODE}"] = ApiError(status=500, reason="InternalError", message="etcd")
    before = (_errors("apply"), _errors("node-labels"), _errors("cleanup"))
    with pytest.raises(SyncFailedError, match="2 failure") as raised:
        _reconciler(SYSFS / "a30-x2", cluster, vendors, pci_ids).reconcile(SYNC)
    assert [f.step for f in raised.value.failures] == ["apply", "node-labels"]
    assert "create" in writer.verbs()  # the second card was still written
    assert (_errors("apply"), _errors("node-labels"), _errors("cleanup")) == (
        before[0] + 1,
        before[1] + 1,
        before[2],
    )


def test_a_cache_wait_that_times_out_fails_the_pass(
    vendors: VendorRegistry, pci_ids: PciIds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writes happened, but the caches did not show them in time: the pass fails (and is
    retried with backoff) instead of passing for a success that the next pass would act on."""
    cluster = _Cluster(RecordingWriter())
    monkeypatch.setattr(cluster.writer, "wait_for_cache", lambda timeout: False)
    reconciler = _reconciler(SYSFS / "a30-x2", cluster, vendors, pci_ids)
    with pytest.raises(CacheLagError, match=r"did not show the sync's \d+ write\(s\)"):
        reconciler.reconcile(SYNC)
    assert "create" in cluster.writer.verbs()  # the writes themselves went out
