"""The loaders' files a driver root lacks are written on the host, mounted by the specs, and leave
with them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
from pytest_mock import MockerFixture

from pkg.backends.driver_files import DriverFiles, SuppliedFile
from pkg.backends.preparation import READ_ONLY, ContainerEdits, DeviceNode, Mount
from pkg.gpuhandler.preparation.cdi import CdiSpecs, DriverSpec
from pkg.gpuhandler.preparation.supplied_files import SuppliedFiles

ICD: Final = SuppliedFile(
    name="OpenCL/vendors/nvidia.icd",
    container_path="/etc/OpenCL/vendors/nvidia.icd",
    content="libnvidia-opencl.so.1\n",
)
LIBCUDA: Final = Mount(
    "/usr/local/nvidia/lib64/libcuda.so.580", "/usr/local/nvidia/lib64/libcuda.so.580", READ_ONLY
)


def _files(*supplied: SuppliedFile, version: str = "580") -> DriverFiles:
    nodes = (DeviceNode(path="/dev/nvidiactl", host_path="/dev/nvidiactl"),)
    edits = ContainerEdits(device_nodes=nodes, mounts=(LIBCUDA,))
    return DriverFiles(version=version, edits=edits, supplied=supplied)


def test_a_supplied_file_is_written_and_mounted_read_only_where_its_loader_looks(tmp_path: Path) -> None:
    supplied = SuppliedFiles(tmp_path / "supplied")

    files = supplied.mounted("nvidia", _files(ICD))

    host = tmp_path / "supplied" / "nvidia" / "OpenCL" / "vendors" / "nvidia.icd"
    assert host.read_text() == "libnvidia-opencl.so.1\n"
    assert host.stat().st_mode & 0o777 == 0o644  # the runtime mounts it into containers of any user
    assert files.edits.mounts == (LIBCUDA, Mount(str(host), "/etc/OpenCL/vendors/nvidia.icd", READ_ONLY))
    assert files.supplied == ()  # nothing left for a later writer to mount twice
    assert files.edits.device_nodes == _files().edits.device_nodes


def test_a_file_in_place_is_not_written_again_and_a_changed_one_is(tmp_path: Path) -> None:
    supplied = SuppliedFiles(tmp_path)
    supplied.mounted("nvidia", _files(ICD))
    host = supplied.path("nvidia", ICD)
    first = host.stat().st_ino

    supplied.mounted("nvidia", _files(ICD))
    assert host.stat().st_ino == first  # the same file: a runtime mounting it meanwhile is undisturbed

    changed = SuppliedFile(
        name=ICD.name, container_path=ICD.container_path, content="libnvidia-opencl.so.2\n"
    )
    supplied.mounted("nvidia", _files(changed))
    assert host.read_text() == "libnvidia-opencl.so.2\n"


def test_in_place_says_whether_every_file_is_there_with_its_content(tmp_path: Path) -> None:
    supplied = SuppliedFiles(tmp_path)
    assert supplied.in_place("nvidia", _files())  # nothing to supply: in place
    assert not supplied.in_place("nvidia", _files(ICD))

    supplied.mounted("nvidia", _files(ICD))
    assert supplied.in_place("nvidia", _files(ICD))

    supplied.path("nvidia", ICD).write_text("something else\n")
    assert not supplied.in_place("nvidia", _files(ICD))


def test_files_without_anything_to_supply_are_given_back_untouched(tmp_path: Path) -> None:
    files = _files()
    assert SuppliedFiles(tmp_path / "supplied").mounted("nvidia", files) is files
    assert not (tmp_path / "supplied").exists()


def test_remove_takes_a_vendors_files_and_leaves_another_vendors(tmp_path: Path) -> None:
    supplied = SuppliedFiles(tmp_path)
    supplied.mounted("nvidia", _files(ICD))
    supplied.mounted("other", _files(ICD))

    assert supplied.remove("nvidia")
    assert not (tmp_path / "nvidia").exists()
    assert supplied.path("other", ICD).is_file()
    assert not supplied.remove("nvidia")  # nothing left


@pytest.mark.parametrize(
    ("vendor", "name"),
    [("nvidia", "../escape"), ("nvidia", "/etc/passwd"), ("nvidia", ""), ("..", "x"), ("a/b", "x")],
)
def test_a_name_that_would_leave_the_folder_is_refused_naming_it(
    tmp_path: Path, vendor: str, name: str
) -> None:
    bad = SuppliedFile(name=name, container_path="/etc/x", content="x\n")
    with pytest.raises(ValueError, match="not a"):
        SuppliedFiles(tmp_path / "supplied").mounted(vendor, _files(bad))
    assert not (tmp_path / "escape").exists()


# The driver spec: the file before the spec that mounts it, again when lost, gone with the specs.


def _spec(
    tmp_path: Path, mocker: MockerFixture, files: DriverFiles
) -> tuple[DriverSpec, CdiSpecs, SuppliedFiles]:
    cdi, supplied = CdiSpecs(tmp_path / "cdi"), SuppliedFiles(tmp_path / "supplied")
    spec = DriverSpec(
        files=lambda capabilities: files,
        cdi=cdi,
        supplied=supplied,
        vendor="nvidia",
        status=mocker.MagicMock(),
    )
    return spec, cdi, supplied


def _mounts(path: Path) -> dict[str, str]:
    spec: dict[str, Any] = json.loads(path.read_text())
    return {m["containerPath"]: m["hostPath"] for m in spec["containerEdits"]["mounts"]}


def test_the_base_spec_mounts_the_supplied_file_written_before_it(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    spec, cdi, supplied = _spec(tmp_path, mocker, _files(ICD))
    host = supplied.path("nvidia", ICD)
    written_before: list[bool] = []
    write_driver = cdi.write_driver

    def watched(vendor: str, files: DriverFiles, capability: str | None = None) -> str:
        written_before.append(host.is_file())
        return write_driver(vendor, files, capability)

    mocker.patch.object(cdi, "write_driver", side_effect=watched)

    spec.device_ids()

    assert written_before == [True]  # one spec (the same files for every set), written after its file
    assert _mounts(cdi.driver_path("nvidia"))["/etc/OpenCL/vendors/nvidia.icd"] == str(host)
    assert host.read_text() == "libnvidia-opencl.so.1\n"


def test_a_lost_supplied_file_is_written_again_by_the_next_prepare(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    spec, _, supplied = _spec(tmp_path, mocker, _files(ICD))
    spec.device_ids()
    supplied.path("nvidia", ICD).unlink()

    spec.device_ids()

    assert supplied.path("nvidia", ICD).read_text() == "libnvidia-opencl.so.1\n"


def test_withdrawing_the_specs_removes_the_supplied_files(tmp_path: Path, mocker: MockerFixture) -> None:
    spec, cdi, _ = _spec(tmp_path, mocker, _files(ICD))
    spec.device_ids()

    assert spec.withdraw()

    assert not cdi.driver_path("nvidia").exists()
    assert not (tmp_path / "supplied" / "nvidia").exists()
