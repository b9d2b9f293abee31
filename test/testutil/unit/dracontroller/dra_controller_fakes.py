"""Fakes for gpu-dra-controller's unit tests: an API server for claims, stores, a wired reconciler.

:class:`FakeClaimApi` answers the two requests :class:`ClaimWriter` makes (JSON patch, status PUT)
the way kube-apiserver does: a failed ``test`` op is a 422 without causes, a stale status PUT a 409,
every write bumps the resourceVersion. It also holds Pods for the consistent read of
:class:`PodReferenceReader` (``list_page``, filtered by namespace and phase, paged), separately
from the Pod *cache*, so a test can make the cache lag the API server. :class:`Env` wires the real
reconciler, handlers, writer, cache reader and in-flight record over real stores; the watch is
simulated by :meth:`Env.sync`, so a test decides whether the cache has seen a write yet.
"""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from dependency_injector import providers
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1DeviceClass,
    V1Namespace,
    V1ObjectMeta,
    V1ResourceSlice,
)
from pytest_mock import MockerFixture, MockType

from pkg.dra.allocator import Allocator
from pkg.dracontroller.internal.indexes import CLAIM_INDEXERS, POD_INDEXERS
from pkg.dracontroller.internal.service import CacheReader, ClaimWriter, InFlight, PodReferenceReader
from pkg.dracontroller.setup import ResourceClaimContainer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.cache.store import Store
from pkg.framework.client import ConflictError, InvalidError, KubeClient, ListPage, NotFoundError
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile.contract import Request, Result
from testutil.k8s_fields import meta, name_of, namespace_of
from testutil.unit.dra.allocator.alloc_builders import DRIVER, device_class

T0 = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
MIG_EXPR = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].deviceType == "MIG"'


def our_mig_class(profile: str | None = None, name: str | None = None) -> V1DeviceClass:
    expr = MIG_EXPR + (f' && device.attributes["{DRIVER}"].migProfile == "{profile}"' if profile else "")
    return device_class(name or f"mig-{profile or 'any'}", expr)


def our_physical_class(name: str = "physical") -> V1DeviceClass:
    expr = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].deviceType == "Physical"'
    return device_class(name, expr + " && !device.allowMultipleAllocations")


def _tokens(path: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in path.lstrip("/").split("/")]


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for op in ops:
        *parents, last = _tokens(op["path"])
        target = doc
        for token in parents:
            target = target[token]
        if op["op"] == "test":
            if target.get(last) != op["value"]:
                raise InvalidError(status=422, reason="Invalid", message="the request is invalid", details={})
        elif op["op"] in ("add", "replace"):
            target[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del target[last]
    return doc


class FakeClaimApi:
    """Claims by ``namespace/name`` in their JSON form; records every write."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, str, Any]] = []  # (verb, key, body or ops)
        self.fail_next: list[Exception] = []
        self.pods: dict[str, dict[str, Any]] = {}  # namespace/name -> JSON
        self.pod_lists: list[tuple[str | None, str | None]] = []  # (namespace, fieldSelector) per page
        self.on_write: list[Any] = []  # callables run after each successful write (a racing creator)
        self._rv = itertools.count(100)
        self._uid = itertools.count(1)

    def put(self, claim: ResourceV1ResourceClaim, *, age: int = 0) -> ResourceV1ResourceClaim:
        claim = claim.model_copy(deep=True)
        metadata = meta(claim)
        metadata.uid = metadata.uid or f"uid-{next(self._uid)}"
        metadata.creation_timestamp = metadata.creation_timestamp or T0 - timedelta(seconds=age)
        metadata.resource_version = str(next(self._rv))
        key = f"{metadata.namespace}/{metadata.name}"
        self.objects[key] = RESOURCE_CLAIM.encode(claim)
        return RESOURCE_CLAIM.decode(self.objects[key])

    def get(self, key: str) -> ResourceV1ResourceClaim:
        return RESOURCE_CLAIM.decode(self.objects[key])

    def put_pod(self, pod: Any) -> None:
        self.pods[f"{pod.metadata.namespace}/{pod.metadata.name}"] = POD.encode(pod)

    def list_page(
        self,
        kind: Any,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        **_: Any,
    ) -> ListPage:
        assert kind is POD
        self.pod_lists.append((namespace, field_selector))
        done = ("Succeeded", "Failed") if field_selector else ()
        items = [
            doc
            for key, doc in sorted(self.pods.items())
            if key.startswith(f"{namespace}/") and (doc.get("status") or {}).get("phase") not in done
        ]
        start = int(continue_token or 0)
        rest = start + limit < len(items)
        return ListPage(items[start : start + limit], str(next(self._rv)), str(start + limit) if rest else "")

    def _wrote(self) -> None:
        for hook in list(self.on_write):
            hook()

    def _stored(self, key: str) -> dict[str, Any]:
        if self.fail_next:
            raise self.fail_next.pop(0)
        if key not in self.objects:
            raise NotFoundError(status=404, reason="NotFound", message=f"{key} not found")
        return self.objects[key]

    def patch(
        self,
        kind: Any,
        name: str,
        patch: Any,
        *,
        patch_type: Any,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Any:
        """A JSON patch; on ``status`` it is the status write (the server always shows a ``status``)."""
        key = f"{namespace}/{name}"
        self.writes.append(("status" if subresource == "status" else "patch", key, patch))
        stored = self._stored(key)
        if subresource == "status":
            stored = {**stored, "status": stored.get("status") or {}}
        doc = apply_json_patch(stored, patch)
        doc["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[key] = doc
        self._wrote()
        return RESOURCE_CLAIM.decode(doc)

    def update_status(self, kind: Any, obj: ResourceV1ResourceClaim) -> Any:
        key = f"{meta(obj).namespace}/{meta(obj).name}"
        self.writes.append(("status", key, obj))
        stored = self._stored(key)
        if stored["metadata"]["resourceVersion"] != meta(obj).resource_version:
            raise ConflictError(status=409, reason="Conflict", message="the object has been modified")
        doc = copy.deepcopy(stored)
        body = RESOURCE_CLAIM.encode(obj)
        doc["status"] = body.get("status") or {}
        doc["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[key] = doc
        self._wrote()
        return RESOURCE_CLAIM.decode(doc)


class Env:
    """The reconciler wired over real stores and the fake API."""

    def __init__(
        self, mocker: MockerFixture, slices: list[V1ResourceSlice], classes: list[V1DeviceClass]
    ) -> None:
        self.claims: Store[Any] = Store(indexers=CLAIM_INDEXERS)
        self.pods: Store[Any] = Store(indexers=POD_INDEXERS)
        self.slices: Store[Any] = Store()
        self.classes: Store[Any] = Store()
        self.namespaces: Store[Any] = Store()
        for rs in slices:
            self.slices.update(rs)
        for cls in classes:
            self.classes.update(cls)
        self.namespaces.update(V1Namespace(metadata=V1ObjectMeta(name="default")))
        self.in_flight = InFlight()
        self.cache_reader = CacheReader(
            claims=self.claims, pods=self.pods, slices=self.slices, classes=self.classes,
            namespaces=self.namespaces, in_flight=self.in_flight,
        )  # fmt: skip
        self.api = FakeClaimApi()
        self.writer = ClaimWriter(self.api, self.in_flight)  # type: ignore[arg-type]
        self.recorder: MockType = mocker.MagicMock(spec=EventRecorderLogger)
        shares = (f"share-{i}" for i in itertools.count(1))
        self.allocator = Allocator(share_id=lambda: next(shares))
        # The real container, its I/O parts overridden: the reconciler, the handlers and the
        # decisions service are built exactly as the process builds them.
        self.container = ResourceClaimContainer(
            client=mocker.MagicMock(spec=KubeClient),
            informers=mocker.MagicMock(spec=InformerFactory),
            recorder=self.recorder,
        )
        self.container.cache_reader.override(providers.Object(self.cache_reader))
        self.container.writer.override(providers.Object(self.writer))
        self.container.allocator.override(providers.Object(self.allocator))
        self.container.pod_references.override(providers.Object(PodReferenceReader(self.api)))
        self.reconciler = self.container.reconciler()

    def add(self, claim: ResourceV1ResourceClaim, *, age: int = 0) -> ResourceV1ResourceClaim:
        stored = self.api.put(claim, age=age)
        self.claims.update(stored)
        return stored

    def add_pod(self, pod: Any, *, cached: bool = True) -> None:
        """Creates a Pod on the API server; ``cached=False``: the Pod cache has not seen it yet."""
        self.api.put_pod(pod)
        if cached:
            self.pods.update(pod)

    def sync(self) -> None:
        """Delivers every stored claim to the cache, as the watch would."""
        for key in list(self.api.objects):
            self.claims.update(self.api.get(key))

    def reconcile(self, claim: ResourceV1ResourceClaim) -> Result:
        return self.reconciler.reconcile(Request(name=name_of(claim), namespace=namespace_of(claim)))

    def stored(self, claim: ResourceV1ResourceClaim) -> ResourceV1ResourceClaim:
        return self.api.get(f"{meta(claim).namespace}/{meta(claim).name}")

    def events(self) -> list[tuple[str, str, str]]:
        return [
            (c.kwargs["type_"], c.kwargs["reason"], c.kwargs["message"])
            for c in self.recorder.event.mock_calls
        ]
