"""``kubectl get gpuclasses`` shows a Strategy for every class, not only for those that spell one out.

A printer column is one JSONPath the API server evaluates on the stored object, with no fallback;
the schema's defaults are what fills ``.spec.sharing.strategy`` for a class that omits ``sharing``
(the API server applies them on every decode: a request's body and an object read from etcd). The
test applies the committed CRD's defaults as the server does (outermost first, a defaulted object's
own properties defaulted in turn) and evaluates the column on an exclusive, a MIG and a shared
class, so a CRD without the ``sharing`` default shows an empty cell again and fails here.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.gpu.v1alpha1 import GPUClass

CRD = Path(__file__).resolve().parents[3] / "config" / "crd" / "gpu.deckhouse.io_gpuclasses.yaml"


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """The structural-schema defaulting of the API server, for objects and their properties."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for name, sub in (schema.get("properties") or {}).items():
        if name not in out and "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
        if name in out:
            out[name] = apply_defaults(out[name], sub)
    return out


def evaluate(path: str, value: Any) -> Any:
    """A printer column's simple JSONPath (``.a.b.c``); None where a step is missing."""
    for step in path.strip(".").split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    return document


def gpu_class(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GPUClass",
        "metadata": {"name": "c"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        ({"vendor": "Nvidia", "deviceType": "Physical"}, "Exclusive"),
        ({"vendor": "Nvidia", "deviceType": "MIG", "nvidia": {"mig": {"profile": "1g.10gb"}}}, "Exclusive"),
        ({"vendor": "Nvidia", "deviceType": "Physical", "sharing": {}}, "Exclusive"),
        ({"vendor": "Nvidia", "deviceType": "Physical", "sharing": {"strategy": "MPS"}}, "MPS"),
        (
            {"vendor": "Nvidia", "deviceType": "Physical", "sharing": {"strategy": "TimeSlicing"}},
            "TimeSlicing",
        ),
    ],
    ids=["exclusive", "mig", "empty-sharing", "mps", "timeslicing"],
)
def test_strategy_column_resolves_for_every_class(
    crd: dict[str, Any], spec: dict[str, Any], shown: str
) -> None:
    version = crd["spec"]["versions"][0]
    column = next(c for c in version["additionalPrinterColumns"] if c["name"] == "Strategy")
    stored = apply_defaults(gpu_class(spec), version["schema"]["openAPIV3Schema"])
    assert evaluate(column["jsonPath"], stored) == shown
    assert GPUClass.model_validate(stored).spec.sharing is not None  # the model reads what the server returns
