"""The committed CRDs in config/crd: what kubectl and the API server will see, and that they are current."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = REPO_ROOT / "config" / "crd"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_crds", REPO_ROOT / "hack" / "generate_crds.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((CRD_DIR / name).read_text(encoding="utf-8"))
    return document


@pytest.fixture(scope="module")
def physicalgpus() -> dict[str, Any]:
    return load("gpu.deckhouse.io_physicalgpus.yaml")


@pytest.fixture(scope="module")
def gpuclasses() -> dict[str, Any]:
    return load("gpu.deckhouse.io_gpuclasses.yaml")


def columns(crd: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {column["name"]: column for column in crd["spec"]["versions"][0]["additionalPrinterColumns"]}


def test_committed_crds_match_the_models() -> None:
    assert load_generator().check(CRD_DIR) == []


def test_check_names_a_stale_file_and_main_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    generator = load_generator()
    assert generator.main(["--output-dir", str(tmp_path)]) == 0
    assert generator.main(["--check", "--output-dir", str(tmp_path)]) == 0
    stale = tmp_path / "gpu.deckhouse.io_gpuclasses.yaml"
    stale.write_text(stale.read_text().replace("gcls", "gc"))
    problems = generator.check(tmp_path)
    assert len(problems) == 1
    assert f"{stale} is stale" in problems[0]
    assert "-    - gc\n+    - gcls" in problems[0]
    assert generator.main(["--check", "--output-dir", str(tmp_path)]) == 1
    assert "gpu.deckhouse.io_gpuclasses.yaml is stale" in capsys.readouterr().err


def test_rendering_is_deterministic() -> None:
    generator = load_generator()
    assert generator.render_all() == generator.render_all()


@pytest.mark.parametrize(
    ("name", "plural", "kind", "short_name"),
    [
        ("gpu.deckhouse.io_physicalgpus.yaml", "physicalgpus", "PhysicalGPU", "pgpu"),
        ("gpu.deckhouse.io_gpuclasses.yaml", "gpuclasses", "GPUClass", "gcls"),
    ],
)
def test_names_scope_version_and_status_subresource(
    name: str, plural: str, kind: str, short_name: str
) -> None:
    crd = load(name)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{plural}.gpu.deckhouse.io"
    assert crd["metadata"]["labels"] == {"app.kubernetes.io/part-of": "gpu-control-plane"}
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == ("gpu.deckhouse.io", "Cluster")
    assert spec["names"]["kind"] == kind
    assert spec["names"]["plural"] == plural
    assert spec["names"]["shortNames"] == [short_name]
    assert spec["names"]["categories"] == ["gpu"]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_physicalgpu_printer_columns(physicalgpus: dict[str, Any]) -> None:
    cols = columns(physicalgpus)
    assert list(cols) == [
        "Node",
        "Vendor",
        "Device",
        "DriverReady",
        "HardwareHealthy",
        "Age",
        "Driver",
        "CUDA",
        "ComputeCap",
        "MIG",
    ]
    assert cols["Node"]["jsonPath"] == ".status.nodeInfo.nodeName"
    assert cols["Vendor"]["jsonPath"] == r".metadata.labels['gpu\.deckhouse\.io/vendor']"
    assert cols["DriverReady"]["jsonPath"] == '.status.conditions[?(@.type=="DriverReady")].status'
    assert cols["HardwareHealthy"]["jsonPath"] == '.status.conditions[?(@.type=="HardwareHealthy")].status'
    assert cols["Age"] == {"name": "Age", "jsonPath": ".metadata.creationTimestamp", "type": "date"}
    wide = {name for name, column in cols.items() if column.get("priority") == 1}
    assert wide == {"Driver", "CUDA", "ComputeCap", "MIG"}
    assert cols["MIG"]["type"] == "boolean"


def test_gpuclass_printer_columns(gpuclasses: dict[str, Any]) -> None:
    cols = columns(gpuclasses)
    assert list(cols) == ["DeviceType", "Strategy", "Valid", "DeviceClass", "Age"]
    assert cols["DeviceClass"]["jsonPath"] == ".status.generated.deviceClassName"


def test_printer_columns_point_at_schema_fields(
    physicalgpus: dict[str, Any], gpuclasses: dict[str, Any]
) -> None:
    for crd in (physicalgpus, gpuclasses):
        version = crd["spec"]["versions"][0]
        root = version["schema"]["openAPIV3Schema"]
        for column in version["additionalPrinterColumns"]:
            path = column["jsonPath"]
            if not path.startswith((".status.", ".spec.")) or "[" in path:
                continue
            node = root
            for part in path.strip(".").split("."):
                node = node["properties"][part]
            expected = "boolean" if column["type"] == "boolean" else "string"
            assert node["type"] == expected, path
