"""The built-in MIG tables: generated from the fact file, current, and self-consistent."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pkg.backends.nvidia.profiles import ModelFacts, all_models, model_for_pci_device

ROOT = Path(__file__).resolve().parents[3]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_mig_tables", ROOT / "hack" / "generate_mig_tables.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate_mig_tables", module)
    spec.loader.exec_module(module)
    return module


def test_the_generated_module_matches_the_fact_file() -> None:
    generator = _generator()
    source = generator.source_path()
    diff = generator.check(source)
    assert not diff, (
        "pkg/backends/nvidia/mig_tables.py is stale; run hack/generate_mig_tables.py\n" + "\n".join(diff[:40])
    )


def test_a_stale_module_is_reported(tmp_path: Path) -> None:
    generator = _generator()
    source = generator.source_path()
    stale = tmp_path / "mig_tables.py"
    stale.write_text(generator.render(source).replace("'NVIDIA A30'", "'NVIDIA A31'"))
    assert any("NVIDIA A31" in line for line in generator.check(source, stale))
    assert generator.main(["--check", "--source", str(source)]) == 0


def test_lookups() -> None:
    a30 = model_for_pci_device("20B7")
    assert a30 is not None
    assert a30.product_name == "NVIDIA A30"
    assert model_for_pci_device("27b8") is None  # the L4 has no MIG
    eighty = {m.pci_device_id: m.product_name for m in all_models() if m.key == "A100_80GB"}
    assert eighty == {"20b2": "NVIDIA A100-SXM4-80GB", "20b5": "NVIDIA A100 80GB PCIe"}
    a30_ids = [(p.index, p.info.id, p.info.name) for p in a30.profiles]
    assert a30_ids == [
        (0, 14, "1g.6gb"),
        (7, 21, "1g.6gb+me"),
        (1, 5, "2g.12gb"),
        (8, 6, "2g.12gb+me"),
        (3, 0, "4g.24gb"),
    ]


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.pci_device_id)
def test_every_table_is_consistent(model: ModelFacts) -> None:
    assert len({p.index for p in model.profiles}) == len(model.profiles)
    assert len({p.info.id for p in model.profiles}) == len(model.profiles)
    for profile in model.profiles:
        info = profile.info
        assert 0 < info.memory_mib <= model.memory_mib
        assert 1 <= info.slice_count <= model.compute_slices
        assert profile.placements, info.name
        assert all(start + size <= model.memory_slices for start, size in profile.placements)
        assert len({size for _, size in profile.placements}) == 1
        assert info.instance_count <= len(profile.placements)
    full = max(model.profiles, key=lambda p: p.info.slice_count)
    assert full.placements == ((0, model.memory_slices),)
    assert full.info.slice_count == model.compute_slices
