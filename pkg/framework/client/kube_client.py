"""One generic, typed client for every kind the project touches.

Why not the generated ``CoreV1Api``-style classes: the framework needs the same operations (paged
list, watch with bookmarks and a read timeout, status update, JSON patch, server-side apply) for
built-in kinds and for our CRDs alike, and it needs the raw watch stream to notice a silently dead
connection. The official client's ``ApiClient`` still does transport, auth and TLS; this module adds
REST paths from :class:`ResourceKind`, typed models and typed errors, and sends bodies as compact
JSON (:mod:`.compact_body`: the API server keeps opaque parameters as the bytes it was sent).

Thread safety: ``ApiClient`` uses a urllib3 pool manager, which is thread-safe, and this class keeps
no per-call state, so one instance is shared by every worker thread.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from pkg.framework.client import compact_body
from pkg.framework.client.errors import error_from_status, from_api_exception
from pkg.framework.client.kinds import ResourceKind
from pkg.framework.client.watch import (
    WatchEvent,
    WatchStreamClosedError,
    decode_watch_stream,
)

ModelT = TypeVar("ModelT", bound=BaseModel)


class PatchType(enum.StrEnum):
    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True)
class ListPage:
    """One page of a list: raw items, the list's resourceVersion and the continue token."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str


class KubeClient:
    """Typed CRUD, list, watch, patch and apply for any :class:`ResourceKind`."""

    def __init__(self, api_client: ApiClient, *, field_manager: str, request_timeout: float = 30.0):
        self._api = api_client
        self.field_manager = field_manager
        self._timeout = request_timeout

    @property
    def api_client(self) -> ApiClient:
        """The transport, for a second client with other settings over the same connection pool."""
        return self._api

    # -- transport -------------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
        raw: bool = False,
    ) -> Any:
        params = [(k, v) for k, v in (query or {}).items() if v is not None and v != ""]
        headers = {"Accept": "application/json", "Content-Type": content_type}
        _, url, headers, _, _ = self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        try:
            response: Any = (
                self._api.call_api(
                    method, url, header_params=headers, _request_timeout=timeout or self._timeout
                )
                if body is None
                else compact_body.send(
                    self._api, method, url, headers=headers, body=body, timeout=timeout or self._timeout
                )
            )
        except ApiException as exc:
            raise from_api_exception(exc) from exc
        if stream:
            if not 200 <= response.status <= 299:
                raise error_from_status(response.status, response.read())
            return response.response
        data = response.read()
        if not 200 <= response.status <= 299:
            raise error_from_status(response.status, data)
        if raw:
            return bytes(data)
        return json.loads(data) if data else None

    # -- reads -----------------------------------------------------------------------------------

    def get(self, kind: ResourceKind[ModelT], name: str, namespace: str | None = None) -> ModelT:
        return kind.decode(self._request("GET", kind.object_path(name, namespace)))

    def list_page(
        self,
        kind: ResourceKind[Any],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListPage:
        """One page of a list (the informer pages through these itself)."""
        query = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_token,
            "resourceVersion": None if continue_token else resource_version,
        }
        data = self._request("GET", kind.collection_path(namespace), query=query)
        meta = data.get("metadata") or {}
        return ListPage(
            items=list(data.get("items") or []),
            resource_version=str(meta.get("resourceVersion") or ""),
            continue_token=str(meta.get("continue") or ""),
        )

    def list_page_json(
        self,
        kind: ResourceKind[Any],
        *,
        limit: int = 500,
        continue_token: str | None = None,
    ) -> bytes:
        """One page of a cluster-wide list as the server's JSON bytes, for a reader that decodes
        its own way (``explain`` reads 200 MB of ResourceSlices that way, page by page)."""
        query = {"limit": limit, "continue": continue_token}
        data: bytes = self._request("GET", kind.collection_path(), query=query, raw=True)
        return data

    def list(
        self,
        kind: ResourceKind[ModelT],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
    ) -> tuple[list[ModelT], str]:
        """All objects (every page of one consistent snapshot) and the snapshot's resourceVersion."""
        items: list[ModelT] = []
        token: str | None = None
        while True:
            page = self.list_page(
                kind,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=limit,
                continue_token=token,
            )
            items.extend(kind.decode(raw) for raw in page.items)
            if not page.continue_token:
                return items, page.resource_version
            token = page.continue_token

    def watch(
        self,
        kind: ResourceKind[Any],
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        read_timeout: float = 90.0,
    ) -> Iterator[WatchEvent]:
        """Streams events after ``resource_version`` with bookmarks.

        ``read_timeout`` bounds the silence between two chunks: the server sends a bookmark about
        once a minute, so a longer silence means a dead connection, and the stream ends with
        :class:`WatchStreamClosedError` instead of hanging forever. An ``ERROR`` event raises the typed
        error it carries (410 Gone becomes :class:`~pkg.framework.client.errors.GoneError`).
        """
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
        }
        response = self._request(
            "GET",
            kind.collection_path(namespace),
            query=query,
            timeout=(self._timeout, read_timeout),
            stream=True,
        )
        try:
            yield from decode_watch_stream(response)
        except (ReadTimeoutError, ProtocolError, TimeoutError, ConnectionError) as exc:
            raise WatchStreamClosedError(str(exc)) from exc
        finally:
            response.release_conn()

    # -- writes ----------------------------------------------------------------------------------

    def create(self, kind: ResourceKind[ModelT], obj: ModelT, namespace: str | None = None) -> ModelT:
        path = kind.collection_path(namespace or _namespace_of(obj))
        return kind.decode(self._request("POST", path, query=self._manager(), body=kind.encode(obj)))

    def update(self, kind: ResourceKind[ModelT], obj: ModelT, *, subresource: str | None = None) -> ModelT:
        """PUT with the object's resourceVersion: a stale read raises ConflictError."""
        name, namespace = _name_of(obj), _namespace_of(obj)
        path = kind.object_path(name, namespace, subresource)
        return kind.decode(self._request("PUT", path, query=self._manager(), body=kind.encode(obj)))

    def update_status(self, kind: ResourceKind[ModelT], obj: ModelT) -> ModelT:
        return self.update(kind, obj, subresource="status")

    def patch(
        self,
        kind: ResourceKind[ModelT],
        name: str,
        patch: Any,
        *,
        patch_type: PatchType,
        namespace: str | None = None,
        subresource: str | None = None,
        force: bool = False,
    ) -> ModelT:
        query = self._manager()
        if patch_type is PatchType.APPLY and force:
            query["force"] = "true"
        path = kind.object_path(name, namespace, subresource)
        return kind.decode(self._request("PATCH", path, query=query, body=patch, content_type=patch_type))

    def apply(
        self,
        kind: ResourceKind[ModelT],
        obj: ModelT | dict[str, Any],
        *,
        force: bool = True,
        subresource: str | None = None,
    ) -> ModelT:
        """Server-side apply under this client's field manager (owns exactly the fields sent)."""
        body = obj if isinstance(obj, dict) else kind.encode(obj)
        body.setdefault("apiVersion", kind.api_version)
        body.setdefault("kind", kind.kind)
        meta = body.get("metadata") or {}
        return self.patch(
            kind,
            meta["name"],
            body,
            patch_type=PatchType.APPLY,
            namespace=meta.get("namespace"),
            subresource=subresource,
            force=force,
        )

    def delete(
        self,
        kind: ResourceKind[Any],
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
    ) -> None:
        """Deletes one object; preconditions make it safe against a same-named replacement."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            body["preconditions"] = preconditions
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        self._request("DELETE", kind.object_path(name, namespace), body=body)

    def raw(self, method: str, path: str, *, body: Any = None, content_type: str = "application/json") -> Any:
        """An arbitrary request (``/version``, ``/readyz``) answered as parsed JSON."""
        return self._request(method, path, body=body, content_type=content_type)

    def _manager(self) -> dict[str, Any]:
        return {"fieldManager": self.field_manager}


def _name_of(obj: BaseModel) -> str:
    name = getattr(getattr(obj, "metadata", None), "name", None)
    if not name:
        raise ValueError(f"{type(obj).__name__} has no metadata.name")
    return str(name)


def _namespace_of(obj: BaseModel) -> str | None:
    namespace = getattr(getattr(obj, "metadata", None), "namespace", None)
    return str(namespace) if namespace else None
