"""Prepare gives containers the driver's user space, or fails before it changes anything."""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import (
    A30,
    CDI_HOOK,
    mig_offer,
    node,
    stand_in_driver,
    whole_offer,
)

from pkg.backends.driver_files import DriverFiles, DriverFilesError, DriverRootOptions
from pkg.backends.preparation import ContainerEdits, DeviceNode
from pkg.gpuhandler.preparation.cdi import CdiSpecs, DriverSpec
from pkg.gpuhandler.preparation.cdi_hook import install_cdi_hook
from pkg.gpuhandler.preparation.driver_files_status import DriverFilesFinding
from pkg.gpuhandler.preparation.runnable import leave_node
from pkg.gpuhandler.preparation.supplied_files import SuppliedFiles

DRIVER_ID = "k8s.gpu.deckhouse.io/driver=nvidia"


def test_a_prepared_card_names_the_base_spec_which_holds_the_driver_files(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30))
    claim = n.claims.allocate("train", [offer])

    [device] = n.driver.prepare([claim])[claim.uid].devices

    assert device.cdi_device_ids[1:] == (DRIVER_ID,)
    spec = json.loads(n.container.cdi().driver_path("nvidia").read_text())
    mounts = {m["containerPath"] for m in spec["containerEdits"]["mounts"]}
    version = stand_in_driver().version
    assert f"/usr/local/nvidia/lib64/libcuda.so.{version}" in mounts
    assert "/usr/bin/nvidia-smi" in mounts
    assert {h["path"] for h in spec["containerEdits"]["hooks"]} == {str(CDI_HOOK)}


def test_a_missing_driver_root_fails_the_prepare_before_the_node_changes(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, driver_root=DriverRootOptions(root=tmp_path / "no-driver", cdi_hook=CDI_HOOK))
    [offer] = n.offers.publish(mig_offer(A30, start=3))
    claim = n.claims.allocate("train", [offer])

    result = n.driver.prepare([claim])[claim.uid]

    assert str(tmp_path / "no-driver") in result.error
    assert n.container.store().load().claims == {}  # nothing recorded, so nothing to release
    assert not n.backend.preparer.mig_enabled(A30)  # the card untouched
    assert not n.container.cdi().driver_path("nvidia").exists()


def test_driver_spec_reports_the_state_and_fails_with_the_reason(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    status = mocker.MagicMock()
    edits = ContainerEdits(device_nodes=(DeviceNode(path="/dev/nvidiactl", host_path="/dev/nvidiactl"),))
    answers: list[DriverFiles | DriverFilesError] = [
        DriverFilesError(reason="DriverVersionMismatch", message="root holds 575, module is 580"),
        DriverFiles(version="580.1", edits=edits, found={"libraries": 7}),
    ]

    def files(capabilities: frozenset[str] | None) -> DriverFiles:
        answer = answers[0]
        if isinstance(answer, DriverFilesError):
            answers.pop(0)  # the next look finds the driver
            raise answer
        return answer  # the same edits for every set: no capability of its own

    cdi = mocker.MagicMock(spec=CdiSpecs)
    cdi.write_driver.return_value = DRIVER_ID
    spec = DriverSpec(files=files, cdi=cdi, supplied=SuppliedFiles(tmp_path), vendor="nvidia", status=status)

    spec.refresh()  # a failure is reported, not raised
    assert spec.device_ids() == (DRIVER_ID,)

    reported = [call.args[0] for call in status.report.call_args_list]
    assert reported == [
        DriverFilesFinding(
            ready=False, reason="DriverVersionMismatch", message="root holds 575, module is 580"
        ),
        DriverFilesFinding(ready=True, reason="DriverFilesFound", message="driver 580.1: 7 libraries"),
    ]


def test_the_hook_program_is_installed_under_its_contents_name_once(tmp_path: Path) -> None:
    source = tmp_path / "nvidia-cdi-hook"
    source.write_bytes(b"#!/bin/sh\nexit 0\n")
    first = install_cdi_hook(source, tmp_path / "bin")
    assert first.name.startswith("nvidia-cdi-hook-")
    assert first.read_bytes() == source.read_bytes()
    assert first.stat().st_mode & 0o777 == 0o755
    assert install_cdi_hook(source, tmp_path / "bin") == first
    source.write_bytes(b"#!/bin/sh\nexit 1\n")
    second = install_cdi_hook(source, tmp_path / "bin")
    assert second != first
    assert first.exists()  # kept for containers whose creation read the earlier spec


def test_the_base_spec_leaves_with_the_nodes_last_instance_once_nothing_is_prepared(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    # Socket paths are short (108 bytes): the kubelet root in a short folder of its own.
    with tempfile.TemporaryDirectory(prefix="k", dir="/tmp") as kubelet_root:
        _leaves_with_the_last_instance(mocker, tmp_path, Path(kubelet_root))


def _leaves_with_the_last_instance(mocker: MockerFixture, tmp_path: Path, kubelet_root: Path) -> None:
    n = node(mocker, tmp_path, kubelet_root=kubelet_root)
    settings = n.container.settings()
    store = n.container.store()
    spec: DriverSpec = n.container.driver_spec()
    path = n.container.cdi().driver_path("nvidia")
    [offer] = n.offers.publish(whole_offer(A30))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])

    assert not leave_node(settings, store=store, driver_spec=spec)  # its containers may restart
    assert path.exists()

    n.driver.unprepare([claim])
    newer = settings.data_dir / "dra-newer.sock"
    with socket.socket(socket.AF_UNIX) as serving:  # a newer instance (a rolling update) serves
        serving.bind(str(newer))
        serving.listen()
        assert not leave_node(settings, store=store, driver_spec=spec)
        assert path.exists()
    newer.unlink()

    assert leave_node(settings, store=store, driver_spec=spec)  # uninstalled: nothing left behind
    assert not path.exists()
