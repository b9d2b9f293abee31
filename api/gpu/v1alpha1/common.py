"""What every model of ``gpu.deckhouse.io/v1alpha1`` shares: group constants, the base model, and
annotated types that carry Kubernetes schema facts.

Why one base model (``ApiModel``):
- Python attributes are snake_case while the wire form is camelCase. The alias generator covers
  most names; fields whose camelCase is not mechanical (``profileID``, ``memoryMiB``, ``gpuUUID``)
  declare their alias explicitly. Both spellings are accepted on input (``populate_by_name``).
- ``None`` means "not written". A field whose source is unavailable is left out
  (docs/architecture.md#a-field-without-a-source-is-left-out), so every optional field defaults to
  ``None`` and ``to_api_dict`` drops ``None`` values. Lists follow the same rule, so a writer never
  sends ``conditions: []`` by accident and wipes conditions written by someone else.
- Unknown fields are ignored on input (``extra="ignore"``): an older controller that reads an object
  written by a newer one (a field added in a later release) keeps working instead of failing to
  parse the object. The CRD schema, not the model, is what rejects unknown fields on write (the API
  server prunes them).
- ``validate_assignment`` re-runs the validators when a field is assigned, so cross-field rules
  (for example "``currentState.nvidia.mig`` only when MIG is supported") also hold for an object
  that a reconciler builds up step by step.

Integer widths: Kubernetes schemas say ``format: int32`` or ``int64``. ``Int32``/``Int64`` put the
format into the generated CRD through ``SchemaExtra``. They add no range check in Python: an
``AfterValidator`` there would stop pydantic from rendering field bounds (``ge=0``) as ``minimum``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final, Self

from kubernetes.client import V1Condition
from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, JsonValue
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

GROUP: Final = "gpu.deckhouse.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = "gpu.deckhouse.io/v1alpha1"


@dataclass(frozen=True, slots=True)
class SchemaExtra:
    """Annotation that adds keys to the JSON schema of the type it annotates.

    It works at any depth (inside ``X | None`` or ``list[X]``), unlike ``Field(json_schema_extra=...)``,
    which applies to a field only. Values are stored as a tuple of pairs to stay hashable.
    """

    pairs: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, **values: Any) -> SchemaExtra:
        return cls(tuple(values.items()))

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema.update({key: list(value) if isinstance(value, tuple) else value for key, value in self.pairs})
        return schema


Int32 = Annotated[int, SchemaExtra.of(format="int32")]
Int64 = Annotated[int, SchemaExtra.of(format="int64")]

Conditions = Annotated[
    list[V1Condition],
    SchemaExtra.of(**{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ("type",)}),
]
"""``status.conditions``: a list map keyed by ``type``, as every Kubernetes API declares it, so
server-side apply merges conditions of different writers by type instead of replacing the list."""


def cel_rules(*rules: tuple[str, str]) -> ConfigDict:
    """Model config that attaches CEL validation rules (``x-kubernetes-validations``) to the model's
    schema in the CRD, as ``(rule, message)`` pairs.

    Each rule restates a Python validator of the same model, so the API server refuses what the
    model refuses, whoever writes the object. Without it an object that kubectl accepted could not
    be parsed by the controller that should report it as invalid."""
    validations: list[JsonValue] = [{"rule": rule, "message": message} for rule, message in rules]
    return ConfigDict(json_schema_extra={"x-kubernetes-validations": validations})


class Vendor(StrEnum):
    """GPU vendor, as written in ``capabilities.vendor`` and ``GPUClass.spec.vendor``."""

    NVIDIA = "Nvidia"
    AMD = "Amd"
    INTEL = "Intel"


class ApiModel(BaseModel):
    """Base of every model in this API version (see the module docstring for the choices)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        validate_assignment=True,
    )

    def to_api_dict(self) -> dict[str, Any]:
        """The JSON form the API server stores: camelCase keys, no ``None`` values, enums and
        timestamps as strings. Send it as the body of a create, replace or apply."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    @classmethod
    def from_api_dict(cls, data: Mapping[str, Any]) -> Self:
        """Parse an object as the API server returns it (camelCase keys, unknown fields ignored).

        Raises ``pydantic.ValidationError`` (a ``ValueError``) naming the offending field."""
        return cls.model_validate(data)
