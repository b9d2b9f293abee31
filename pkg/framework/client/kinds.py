"""Resource kinds: where an object lives in the REST API and which model holds it.

A :class:`ResourceKind` is our GroupVersionKind plus its REST mapping. It is declared once per kind
(see :mod:`pkg.framework.client.builtin_kinds`), which is cheaper and more predictable than discovery: the
project talks to a fixed set of kinds whose versions it was written against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class ResourceKind(Generic[ModelT]):
    """A kind's identity, REST path and model.

    ``model`` is a pydantic model whose JSON form (camelCase aliases) is the API's JSON form: the
    official client's models validate and dump camelCase, and so do ours in :mod:`api`.
    """

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    model: type[ModelT]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None, subresource: str | None = None) -> str:
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} is namespaced: a namespace is required to address {name!r}")
        path = f"{self.collection_path(namespace)}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path

    def decode(self, raw: dict[str, Any]) -> ModelT:
        """Parses the API's JSON form of one object."""
        return self.model.model_validate(raw)

    def encode(self, obj: ModelT) -> dict[str, Any]:
        """Renders one object in the API's JSON form, with apiVersion and kind set."""
        data: dict[str, Any] = obj.model_dump(by_alias=True, exclude_none=True, mode="json")
        data["apiVersion"] = self.api_version
        data["kind"] = self.kind
        return data

    def __str__(self) -> str:
        return f"{self.kind}.{self.group or 'core'}/{self.version}"
