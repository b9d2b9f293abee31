"""CRD generation from pydantic models: one source for the Python types and the API server's schema.

``render_crd(Model, names=..., columns=...)`` gives a CustomResourceDefinition dict,
``dump_yaml`` its stable YAML, ``structural_schema`` the converted schema alone and
``check_structural`` the self-check every generated schema passes. ``hack/generate_crds.py`` uses
them to write ``config/crd/``.
"""

from api.crdgen.crd import AGE_COLUMN, CRDNames, PrinterColumn, dump_yaml, render_crd
from api.crdgen.errors import CRDGenerationError
from api.crdgen.schema import structural_schema
from api.crdgen.structural import check_structural

__all__ = [
    "AGE_COLUMN",
    "CRDGenerationError",
    "CRDNames",
    "PrinterColumn",
    "check_structural",
    "dump_yaml",
    "render_crd",
    "structural_schema",
]
