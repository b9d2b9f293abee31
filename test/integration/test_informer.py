"""SharedInformer against the real API server: paging, event order, bookmarks, 410 Gone, restarts.

What each test proves, from the server's point of view:

- ``test_initial_list_is_paged_then_watch_events_arrive_in_order``: with a page size of 2 the first
  list of PhysicalGPUs (a CRD, served from the watch cache) follows continue tokens through every
  page; the handler gets one initial add per object, then the server's create, update and delete
  in the order they happened, each carrying the server's resourceVersion; the store then holds
  exactly what the server lists.
- ``test_bookmarks_advance_the_resource_version_without_object_changes``: on a quiet watch of
  Leases the server's BOOKMARK events alone move ``last_sync_resource_version`` past the last change
  of a watched object, with no notification and no store change. A bookmark carries the watch
  cache's newest resourceVersion, which moves with any Lease write, so the test writes a Lease the
  informer's selector excludes; the informer asks for short server-side watch timeouts, because
  the server sends a bookmark 2 s before a watch's timeout (otherwise once a minute).
- ``test_watch_resumed_after_compaction_relists_and_reports_missed_deletes``: ConfigMaps are served
  straight from etcd here, so a watch resumed from a compacted resourceVersion gets 410 Gone. While
  the informer is disconnected (its next watch held at a gate), objects are created, changed and
  deleted and etcd is compacted; once released the informer re-lists, its store converges to the
  server's, and the object deleted meanwhile reaches the handler as a DeletedFinalStateUnknown
  holding its last known state.
- ``test_watch_resumes_across_an_apiserver_restart_without_losing_changes``: kube-apiserver is
  stopped (gracefully, or killed as in a crash) and started again under a watching informer, with
  one change just before the stop and several right after the start. The reflector backs off,
  resumes the watch from its resourceVersion without a re-list, and every change reaches the
  handler once, in order; the store ends equal to the server's.
- ``test_cached_kind_converges_after_an_apiserver_crash``: the same crash under a PhysicalGPU
  informer. A restarted server's watch cache has no history, so the resumed watch usually gets
  410 Gone and the informer re-lists; either way the store ends equal to the server's and the last
  notification of every changed object carries its final resourceVersion (or is its delete).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from kubernetes.client import V1ConfigMap, V1Lease, V1LeaseSpec, V1ObjectMeta
from testutil.integration.informer_helpers import (
    ObservedClient,
    RecordingListener,
    eventually,
    resource_versions,
    running,
    rv,
)

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.devcluster.cluster import ControlPlane
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.listener import DeletedFinalStateUnknown
from pkg.framework.client import KubeClient, NotFoundError, PatchType, WatchEventType
from pkg.framework.client.builtin_kinds import CONFIG_MAP, LEASE

RUN_LABEL = "test.gpu.deckhouse.io/run"
WATCHED_LABEL = "test.gpu.deckhouse.io/watched"
SYNC_TIMEOUT = 30.0
EVENT_TIMEOUT = 15.0
SHORT_WATCH_TIMEOUT = 3
"""Server-side watch timeout (seconds, randomized up to twice this) where a test needs watches to
end soon: the server sends a bookmark 2 s before the timeout, and a held watch takes effect sooner."""
UNWATCHED_WRITE_INTERVAL = 0.5
"""Under the 1 s between a short watch's start and its bookmark, so each watch sees a newer write."""
RESTART_TIMEOUT = 60.0


def _config_map(name: str, namespace: str, version: str) -> V1ConfigMap:
    return V1ConfigMap(metadata=V1ObjectMeta(name=name, namespace=namespace), data={"v": version})


def _set_version(kube: KubeClient, name: str, namespace: str, version: str) -> V1ConfigMap:
    patch = {"data": {"v": version}}
    return kube.patch(CONFIG_MAP, name, patch, patch_type=PatchType.MERGE, namespace=namespace)


def _server_config_maps(kube: KubeClient, namespace: str) -> dict[str, str]:
    return resource_versions(kube.list(CONFIG_MAP, namespace=namespace)[0])


@pytest.fixture
def gpu_selector(kube: KubeClient, unique: str) -> Iterator[str]:
    """A label selector for this test's PhysicalGPUs (cluster-scoped); they are deleted afterwards."""
    selector = f"{RUN_LABEL}={unique}"
    yield selector
    for gpu in kube.list(PHYSICAL_GPU, label_selector=selector)[0]:
        with contextlib.suppress(NotFoundError):
            kube.delete(PHYSICAL_GPU, str(gpu.metadata.name))


def test_initial_list_is_paged_then_watch_events_arrive_in_order(
    kube: KubeClient, kubeconfig: str, unique: str, gpu_selector: str
) -> None:
    labels = {RUN_LABEL: unique}
    names = [f"gpu-{unique}-{i}" for i in range(5)]
    listed = {}
    for name in names:
        listed[name] = kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name, labels=labels)))
    client = ObservedClient(kubeconfig)
    informer = SharedInformer(client=client, kind=PHYSICAL_GPU, label_selector=gpu_selector, page_size=2)
    handler = RecordingListener()
    informer.add_listener(handler)

    with running(informer):
        assert informer.wait_for_sync(SYNC_TIMEOUT)
        assert client.list_calls == 3, "5 objects in pages of 2 take 3 list calls"
        initial = handler.seen()
        assert sorted((n.action, n.key, n.initial) for n in initial) == [("add", n, True) for n in names]

        new_name = f"gpu-{unique}-new"
        added = kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=new_name, labels=labels)))
        relabel = {"metadata": {"labels": {"stage": "updated"}}}
        updated = kube.patch(PHYSICAL_GPU, names[0], relabel, patch_type=PatchType.MERGE)
        kube.delete(PHYSICAL_GPU, names[1])
        eventually(lambda: handler.count() >= len(names) + 3, timeout=EVENT_TIMEOUT, what="3 watch events")

        changes = handler.seen(len(names))
        assert [(n.action, n.key) for n in changes] == [
            ("add", new_name),
            ("update", names[0]),
            ("delete", names[1]),
        ]
        create, update, delete = changes
        assert not create.initial
        assert rv(create.obj) == rv(added)
        assert rv(update.old) == rv(listed[names[0]])
        assert rv(update.obj) == rv(updated)
        assert update.obj.metadata.labels["stage"] == "updated"
        assert isinstance(delete.obj, PhysicalGPU), "a delete seen by the watch carries the object"
        server = resource_versions(kube.list(PHYSICAL_GPU, label_selector=gpu_selector)[0])
        assert resource_versions(informer.store.list()) == server
        assert len(server) == len(names)


def test_bookmarks_advance_the_resource_version_without_object_changes(
    kube: KubeClient, kubeconfig: str, namespace: str
) -> None:
    def lease(name: str, labels: dict[str, str] | None = None) -> V1Lease:
        meta = V1ObjectMeta(name=name, namespace=namespace, labels=labels)
        return V1Lease(metadata=meta, spec=V1LeaseSpec(holder_identity="a"))

    kube.create(LEASE, lease("watched", {WATCHED_LABEL: "yes"}))
    client = ObservedClient(kubeconfig)
    informer = SharedInformer(
        client=client,
        kind=LEASE,
        namespace=namespace,
        label_selector=f"{WATCHED_LABEL}=yes",
        min_watch_timeout_seconds=SHORT_WATCH_TIMEOUT,
    )
    handler = RecordingListener()
    informer.add_listener(handler)

    with running(informer):
        assert informer.wait_for_sync(SYNC_TIMEOUT)
        holder = {"spec": {"holderIdentity": "b"}}
        changed = kube.patch(LEASE, "watched", holder, patch_type=PatchType.MERGE, namespace=namespace)
        last_change = int(rv(changed))
        eventually(lambda: handler.count() == 2, timeout=EVENT_TIMEOUT, what="the initial add and the update")
        # At least: kube-apiserver renews its own Lease in kube-system, so a bookmark may come early.
        assert int(informer.last_sync_resource_version) >= last_change

        # Writes outside the selector: the informer gets no event for them, only the watch cache's
        # resourceVersion moves on. The server bookmarks only a resourceVersion newer than every
        # event a watch has passed, filtered ones included, so a watch that (re)starts after the
        # write never bookmarks it: the test keeps writing until a bookmark arrives.
        target = int(rv(kube.create(LEASE, lease("unwatched"))))

        def bookmarked() -> bool:
            if int(informer.last_sync_resource_version) >= target:
                return True
            touch = {"spec": {"holderIdentity": f"{time.monotonic()}"}}
            kube.patch(LEASE, "unwatched", touch, patch_type=PatchType.MERGE, namespace=namespace)
            return False

        eventually(
            bookmarked,
            timeout=EVENT_TIMEOUT,
            interval=UNWATCHED_WRITE_INTERVAL,
            what=f"a bookmark at resourceVersion {target} or later",
        )

        resource_version = informer.last_sync_resource_version
        events = client.events()
        bookmarks = {e.resource_version for e in events if e.type is WatchEventType.BOOKMARK}
        assert resource_version in bookmarks, "only a bookmark can have moved the resourceVersion"
        assert int(resource_version) > last_change
        assert [(e.type, e.resource_version) for e in events if e.type is not WatchEventType.BOOKMARK] == [
            (WatchEventType.MODIFIED, str(last_change))
        ]
        assert handler.count() == 2, "a bookmark is not a notification"
        assert resource_versions(informer.store.list()) == {f"{namespace}/watched": str(last_change)}


def test_watch_resumed_after_compaction_relists_and_reports_missed_deletes(
    kube: KubeClient, kubeconfig: str, namespace: str, control_plane: ControlPlane
) -> None:
    for name in ("kept", "changed", "doomed"):
        kube.create(CONFIG_MAP, _config_map(name, namespace, "1"))
    client = ObservedClient(kubeconfig)
    informer = SharedInformer(
        client=client,
        kind=CONFIG_MAP,
        namespace=namespace,
        page_size=2,
        min_watch_timeout_seconds=SHORT_WATCH_TIMEOUT,
    )
    handler = RecordingListener()
    informer.add_listener(handler)

    with running(informer):
        assert informer.wait_for_sync(SYNC_TIMEOUT)
        # Disconnect: the open watch ends at its short server-side timeout; the next one waits.
        client.hold_watches()
        try:
            eventually(client.watch_held, timeout=EVENT_TIMEOUT, what="the informer's next watch")
            resume_from = int(informer.last_sync_resource_version)
            notified, lists = handler.count(), client.list_calls
            born = kube.create(CONFIG_MAP, _config_map("born", namespace, "1"))
            changed = _set_version(kube, "changed", namespace, "2")
            kube.delete(CONFIG_MAP, "doomed", namespace)
            compacted = control_plane.compact_etcd()
            assert compacted > resume_from, "the informer's resourceVersion must be compacted away"
        finally:
            client.release_watches()

        eventually(
            lambda: resource_versions(informer.store.list()) == _server_config_maps(kube, namespace),
            timeout=EVENT_TIMEOUT,
            what="the store to match the server",
        )
        eventually(
            lambda: handler.told(
                notified,
                {f"{namespace}/born": rv(born), f"{namespace}/changed": rv(changed)},
                deleted={f"{namespace}/doomed"},
            ),
            timeout=EVENT_TIMEOUT,
            what="the listener to be told what the store holds",
        )
        assert client.gone_errors >= 1, "the resumed watch must have been answered with 410 Gone"
        assert client.list_calls > lists, "410 Gone must lead to a re-list"
        stored = informer.store.get_by_key(f"{namespace}/changed")
        assert stored is not None
        assert stored.data == {"v": "2"}

        after = handler.seen(notified)
        deletes = [n for n in after if n.action == "delete"]
        assert [n.key for n in deletes] == [f"{namespace}/doomed"]
        tombstone = deletes[0].obj
        assert isinstance(tombstone, DeletedFinalStateUnknown), "a delete seen only by a re-list"
        assert tombstone.obj.data == {"v": "1"}, "the tombstone holds the last state the store had"
        adds = [n for n in after if n.action == "add"]
        assert [(n.key, n.initial) for n in adds] == [(f"{namespace}/born", False)]
        assert rv(adds[0].obj) == rv(born)
        updates = {n.key: n for n in after if n.action == "update"}
        assert rv(updates[f"{namespace}/changed"].obj) == rv(changed)
        assert updates[f"{namespace}/changed"].old.data == {"v": "1"}


@pytest.mark.parametrize("crash", [False, True], ids=["graceful-stop", "crash"])
def test_watch_resumes_across_an_apiserver_restart_without_losing_changes(
    kube: KubeClient, kubeconfig: str, namespace: str, control_plane: ControlPlane, crash: bool
) -> None:
    for name in ("before", "after", "gone"):
        kube.create(CONFIG_MAP, _config_map(name, namespace, "1"))
    client = ObservedClient(kubeconfig)
    informer = SharedInformer(client=client, kind=CONFIG_MAP, namespace=namespace)
    handler = RecordingListener()
    informer.add_listener(handler)

    with running(informer):
        assert informer.wait_for_sync(SYNC_TIMEOUT)
        notified, lists = handler.count(), client.list_calls
        expected = [("update", "before", _set_version(kube, "before", namespace, "2"))]
        try:
            control_plane.stop_apiserver(crash=crash)
        finally:
            control_plane.start_apiserver()
        expected.append(("add", "born", kube.create(CONFIG_MAP, _config_map("born", namespace, "1"))))
        expected.append(("update", "after", _set_version(kube, "after", namespace, "2")))
        kube.delete(CONFIG_MAP, "gone", namespace)

        eventually(
            lambda: resource_versions(informer.store.list()) == _server_config_maps(kube, namespace),
            timeout=RESTART_TIMEOUT,
            what="the store to match the server after the restart",
        )
        eventually(
            lambda: handler.told(
                notified,
                {f"{namespace}/{name}": rv(written) for _, name, written in expected},
                deleted={f"{namespace}/gone"},
            ),
            timeout=EVENT_TIMEOUT,
            what="the listener to be told what the store holds",
        )
        changes = handler.seen(notified)
        assert [(n.action, n.key) for n in changes] == [
            *((action, f"{namespace}/{name}") for action, name, _ in expected),
            ("delete", f"{namespace}/gone"),
        ]
        for notification, (_, _, written) in zip(changes[: len(expected)], expected, strict=True):
            assert rv(notification.obj) == rv(written)
        assert not isinstance(changes[-1].obj, DeletedFinalStateUnknown), "the delete came by the watch"
        assert client.list_calls == lists, "the watch resumed from its resourceVersion, no re-list"


def test_cached_kind_converges_after_an_apiserver_crash(
    kube: KubeClient, kubeconfig: str, unique: str, gpu_selector: str, control_plane: ControlPlane
) -> None:
    labels = {RUN_LABEL: unique}
    for name in ("before", "after", "gone"):
        kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=f"{name}-{unique}", labels=labels)))
    client = ObservedClient(kubeconfig)
    informer = SharedInformer(client=client, kind=PHYSICAL_GPU, label_selector=gpu_selector)
    handler = RecordingListener()
    informer.add_listener(handler)

    def relabel(name: str) -> PhysicalGPU:
        patch = {"metadata": {"labels": {"stage": "changed"}}}
        return kube.patch(PHYSICAL_GPU, f"{name}-{unique}", patch, patch_type=PatchType.MERGE)

    with running(informer):
        assert informer.wait_for_sync(SYNC_TIMEOUT)
        notified = handler.count()
        written = {"before": relabel("before")}
        try:
            control_plane.stop_apiserver(crash=True)
        finally:
            control_plane.start_apiserver()
        born = PhysicalGPU(metadata=V1ObjectMeta(name=f"born-{unique}", labels=labels))
        written["born"] = kube.create(PHYSICAL_GPU, born)
        written["after"] = relabel("after")
        kube.delete(PHYSICAL_GPU, f"gone-{unique}")

        eventually(
            lambda: (
                resource_versions(informer.store.list())
                == resource_versions(kube.list(PHYSICAL_GPU, label_selector=gpu_selector)[0])
            ),
            timeout=RESTART_TIMEOUT,
            what="the store to match the server after the restart",
        )
        eventually(
            lambda: handler.told(
                notified,
                {f"{name}-{unique}": rv(obj) for name, obj in written.items()},
                deleted={f"gone-{unique}"},
            ),
            timeout=EVENT_TIMEOUT,
            what="the listener to be told what the store holds",
        )
        last = {n.key: n for n in handler.seen(notified)}
        for name, obj in written.items():
            assert rv(last[f"{name}-{unique}"].obj) == rv(obj)
        assert last[f"gone-{unique}"].action == "delete"
