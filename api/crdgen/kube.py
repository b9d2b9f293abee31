"""Schemas of the Kubernetes types our models embed, as the API server's own CRDs render them.

Our models use the client's pydantic models for ``metadata`` (``V1ObjectMeta``) and for conditions
(``V1Condition``). Their generated JSON schemas are not what a CRD needs: ``metadata`` at the root of
a CRD must be just ``type: object`` (the API server owns its schema), and ``V1Condition`` carries no
validation, while every Kubernetes API validates conditions as ``metav1.Condition`` does. The
generator below swaps both for the standard forms wherever they appear.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kubernetes.client import V1Condition, V1ObjectMeta
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

OBJECT_META_SCHEMA: Final[dict[str, Any]] = {"type": "object"}

CONDITION_SCHEMA: Final[dict[str, Any]] = {
    "description": "Condition contains details for one aspect of the current state of this API Resource.",
    "type": "object",
    "required": ["lastTransitionTime", "message", "reason", "status", "type"],
    "properties": {
        "lastTransitionTime": {
            "description": "lastTransitionTime is the last time the condition transitioned from one "
            "status to another.",
            "type": "string",
            "format": "date-time",
        },
        "message": {
            "description": "message is a human readable message indicating details about the transition.",
            "type": "string",
            "maxLength": 32768,
        },
        "observedGeneration": {
            "description": "observedGeneration is the .metadata.generation that the condition was set "
            "based upon.",
            "type": "integer",
            "format": "int64",
            "minimum": 0,
        },
        "reason": {
            "description": "reason contains a programmatic identifier indicating the reason for the "
            "condition's last transition, in CamelCase.",
            "type": "string",
            "minLength": 1,
            "maxLength": 1024,
            "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        },
        "status": {
            "description": "status of the condition, one of True, False, Unknown.",
            "type": "string",
            "enum": ["True", "False", "Unknown"],
        },
        "type": {
            "description": "type of condition in CamelCase or in foo.example.com/CamelCase.",
            "type": "string",
            "maxLength": 316,
            "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        },
    },
}


class KubeSchemaGenerator(GenerateJsonSchema):
    """Pydantic's JSON schema generator with the Kubernetes types above substituted."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        cls = schema["cls"]
        if issubclass(cls, V1ObjectMeta):
            return copy.deepcopy(OBJECT_META_SCHEMA)
        if issubclass(cls, V1Condition):
            return copy.deepcopy(CONDITION_SCHEMA)
        return super().model_schema(schema)
