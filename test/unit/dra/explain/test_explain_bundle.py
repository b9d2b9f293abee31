"""Reading explain bundles: what is accepted, and errors that name the file, document and object."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkg.dra.explain.bundle import BundleError, load_bundle

ROOT = Path(__file__).resolve().parents[4]
SAMPLE = ROOT / "config" / "samples" / "explain-bundle.yaml"

CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: c}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.deckhouse.io"'}}]
"""
CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: c}}]}}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bundle.yaml"
    path.write_text(text)
    return path


def test_the_sample_bundle_loads() -> None:
    snapshot = load_bundle(SAMPLE)
    assert len(snapshot.slices) == 4
    assert set(snapshot.classes) == {"gpu-mig-1g", "gpu-mig-2g", "gpu-time-slicing"}
    assert set(snapshot.claims) == {"ml/notebook", "ml/inference", "ml/training", "ml/batch", "ml/share"}
    assert "ml" in snapshot.namespaces


def test_claims_default_to_the_default_namespace_and_lists_are_flattened(tmp_path: Path) -> None:
    items = "\n".join("  - " + line if i == 0 else "    " + line for doc in (CLASS, CLAIM) for i, line in
                      enumerate(doc.strip().splitlines()))  # fmt: skip
    snapshot = load_bundle(write(tmp_path, f"apiVersion: v1\nkind: List\nitems:\n{items}\n"))
    assert set(snapshot.claims) == {"default/x"}
    assert set(snapshot.classes) == {"c"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [", "not valid YAML"),
        ("- 1\n- 2\n", "document 1: expected a Kubernetes object, got list"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "document 1: unsupported kind 'Pod' (p)"),
        (
            CLASS.replace("resource.k8s.io/v1", "resource.k8s.io/v1beta1"),
            "apiVersion 'resource.k8s.io/v1beta1'",
        ),
        (CLASS.replace("selectors:", "selectorz:"), "DeviceClass c is invalid: spec.selectorz: Extra inputs"),
        (CLASS + "---\n" + CLASS, "document 2: V1DeviceClass c appears twice"),
        ("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {}\n", "metadata.name is missing"),
        ("---\n", "no ResourceSlices and no ResourceClaims"),
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n",
            "ResourceSlice s is invalid: spec: Field required",
        ),
    ],
)
def test_bad_bundles_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(BundleError) as caught:
        load_bundle(path)
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="cannot read"):
        load_bundle(tmp_path / "nope.yaml")
