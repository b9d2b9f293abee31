"""A driver upgrade of a stand-in driver root: the new version's files in place of the old ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkg.devcluster.driverroot import SMI_OUTPUT, Layout, build_driver_root, upgrade_driver_root

OLD, NEW = "580.76.05", "590.10.01"


@pytest.mark.parametrize("layout", list(Layout))
def test_an_upgrade_leaves_only_the_new_versions_files(tmp_path: Path, layout: Layout) -> None:
    old = build_driver_root(tmp_path / "root", layout=layout, version=OLD)
    new = upgrade_driver_root(old, layout=layout, version=NEW)
    names = [str(p.relative_to(new.root)) for p in new.root.rglob("*")]
    assert not [name for name in names if OLD in name]
    assert (new.library_folder / f"libcuda.so.{NEW}").is_file()
    assert (new.library_folder / "libcuda.so.1").readlink() == Path(f"libcuda.so.{NEW}")
    assert (new.library_folder / "libcuda.so").resolve() == (new.library_folder / f"libcuda.so.{NEW}")
    assert new.firmware_folder.name == NEW
    assert [p.name for p in new.firmware_folder.iterdir()]
    assert SMI_OUTPUT.format(version=NEW) in (new.binary_folder / "nvidia-smi").read_text()


def test_an_upgrade_to_the_same_version_keeps_the_root(tmp_path: Path) -> None:
    old = build_driver_root(tmp_path / "root", layout=Layout.VENDOR_FOLDER, version=OLD)
    again = upgrade_driver_root(old, layout=Layout.VENDOR_FOLDER, version=OLD)
    assert again == old
    assert (again.library_folder / f"libcuda.so.{OLD}").is_file()
