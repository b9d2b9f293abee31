"""The checkpoint's boot ID comes from the host's /proc as gpu-handler is told where it is.

A simulated host's reboot writes a new boot ID under its proc folder; if gpu-handler read the
machine's own /proc instead, the checkpoint would never see that boot end.
"""

from __future__ import annotations

from pathlib import Path

from pytest_mock import MockerFixture

from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpuhandler.preparation.setup import PluginSettings, PreparationContainer


def _settings(tmp_path: Path, proc_root: Path) -> PluginSettings:
    return PluginSettings(
        node_name="node-a",
        kubelet_root=tmp_path / "kubelet",
        instance="one",
        cdi_dir=tmp_path / "cdi",
        proc_root=proc_root,
    )


def test_the_boot_id_path_is_under_the_proc_root(tmp_path: Path) -> None:
    settings = _settings(tmp_path, tmp_path / "host" / "proc")

    assert settings.boot_id_path == tmp_path / "host" / "proc" / "sys" / "kernel" / "random" / "boot_id"


def test_the_checkpoint_store_reads_each_boot_id_from_the_proc_root(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    proc = tmp_path / "host" / "proc"
    boot_id = proc / "sys" / "kernel" / "random" / "boot_id"
    boot_id.parent.mkdir(parents=True)
    boot_id.write_text("first-boot\n")
    container = PreparationContainer(
        settings=_settings(tmp_path, proc),
        client=mocker.MagicMock(spec=KubeClient),
        informers=mocker.MagicMock(spec=InformerFactory),
        recorder=mocker.MagicMock(spec=EventRecorderLogger),
        backend=mocker.MagicMock(),
        gpu_informer=mocker.MagicMock(spec=SharedInformer),
        card_changes=mocker.MagicMock(),
    )
    read = container.boot_id()

    assert read() == "first-boot"
    boot_id.write_text("second-boot\n")  # the host rebooted under the running process
    assert read() == "second-boot"
