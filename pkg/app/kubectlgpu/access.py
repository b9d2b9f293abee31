"""The plugin's reads, and what each failure means for the person who ran it.

Every read names its verb and resource, so a refusal is reported as ``kubectl auth can-i`` would
ask it (``list resourceslices.resource.k8s.io (cluster-wide)``) and the user knows what to ask the
admin for. Failures are typed, each with its exit code (see :mod:`.cli`), and carry a complete
sentence; nothing here lets an exception of the client or of urllib3 reach the terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pydantic import BaseModel
from urllib3.exceptions import HTTPError

from pkg.framework.client import ApiError, KubeClient, ListPage, NotFoundError, ResourceKind

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, V1ResourceSlice

EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_NOT_FOUND: Final = 3
EXIT_FORBIDDEN: Final = 4
EXIT_NOT_ALLOCATABLE: Final = 5

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class PluginError(Exception):
    """A failure the user is told about in one sentence; ``exit_code`` says which kind."""

    exit_code: int = EXIT_ERROR


class ForbiddenError(PluginError):
    """The API server refused a read: the message names the verb, the resource and the scope."""

    exit_code = EXIT_FORBIDDEN

    def __init__(self, *, verb: str, resource: str, namespace: str | None, hint: str = ""):
        self.verb, self.resource, self.namespace = verb, resource, namespace
        scope = f'in namespace "{namespace}"' if namespace else "at the cluster scope"
        super().__init__(f"forbidden: you cannot {verb} {resource} {scope}{hint}")


class ObjectNotFoundError(PluginError):
    exit_code = EXIT_NOT_FOUND


def resource_name(kind: ResourceKind[Any]) -> str:
    """``resourceslices.resource.k8s.io``: the form ``kubectl auth can-i`` and RBAC rules use."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


class Reader:
    """Reads through one client; each read raises a :class:`PluginError`, never a client error."""

    def __init__(self, api_client: ApiClient, *, request_timeout: float = 30.0):
        self._kube = KubeClient(api_client, field_manager="kubectl-gpu", request_timeout=request_timeout)

    @property
    def client(self) -> KubeClient:
        """The client itself, for ``explain``'s request to gpu-dra-controller (its failures are
        answered by falling back, not by exit codes: :mod:`pkg.dra.explain.request`)."""
        return self._kube

    def get(self, kind: ResourceKind[M], name: str, namespace: str | None = None) -> M:
        with _translated("get", kind, namespace, name=name):
            return self._kube.get(kind, name, namespace)

    def list_all(self, kind: ResourceKind[M], namespace: str | None = None) -> list[M]:
        """Every object of ``kind`` in ``namespace`` (None: all namespaces, or a cluster-scoped kind)."""
        with _translated("list", kind, namespace):
            items, _ = self._kube.list(kind, namespace=namespace)
        return items

    def resource_slices(self) -> list[V1ResourceSlice]:
        """Every ResourceSlice, read as ``explain`` reads them (:mod:`pkg.dra.explain.slice_reader`:
        raw pages, each distinct device part decoded once); a malformed slice is named."""
        # Imported here: only a local explanation reads slices, and the reader imports the slice
        # models, which every other command's start would pay for (docs/performance.md).
        from pkg.dra.explain.slice_reader import SliceReadError, read_slices  # noqa: PLC0415
        from pkg.framework.client.builtin_kinds import RESOURCE_SLICE  # noqa: PLC0415

        with _translated("list", RESOURCE_SLICE, None):
            try:
                return read_slices(self._kube)
            except (SliceReadError, ValueError) as err:  # ValueError: a page that is not JSON
                raise PluginError(f"cannot read the ResourceSlices: {err}") from None

    def list_raw(self, kind: ResourceKind[Any], namespace: str | None = None) -> list[dict[str, Any]]:
        """Every object undecoded, for callers that decode one at a time so one bad object is
        reported alone (a claim whose status another writer filled with something odd)."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        with _translated("list", kind, namespace):
            while True:
                page: ListPage = self._kube.list_page(kind, namespace=namespace, continue_token=token)
                items.extend(page.items)
                if not page.continue_token:
                    return items
                token = page.continue_token


@contextmanager
def _translated(
    verb: str, kind: ResourceKind[Any], namespace: str | None, *, name: str | None = None
) -> Iterator[None]:
    resource = resource_name(kind)
    try:
        yield
    except NotFoundError:
        where = f' in namespace "{namespace}"' if namespace else ""
        what = f'{kind.kind} "{name}"' if name else f"the {resource} API (is the cluster older than 1.34?)"
        raise ObjectNotFoundError(f"{what} not found{where}") from None
    except ApiError as err:
        if err.status == 403:
            raise ForbiddenError(
                verb=verb, resource=resource, namespace=namespace if kind.namespaced else None
            ) from None
        if err.status == 401:
            raise PluginError(
                f"unauthorized: the API server does not accept your credentials ({err.message})"
            ) from None
        raise PluginError(f"{verb} {resource}: the API server answered {err}") from None
    except (HTTPError, OSError) as err:
        raise PluginError(f"cannot reach the API server: {err}") from None


def optional(read: Callable[[], T]) -> T | ForbiddenError:
    """The result of ``read``, or the refusal itself where the user lacks the right: for reads
    that only add detail, whose absence the caller says out loud."""
    try:
        return read()
    except ForbiddenError as refusal:
        return refusal
