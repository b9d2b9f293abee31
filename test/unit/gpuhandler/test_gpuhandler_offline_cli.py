"""``gpu-handler offers`` as a command, and the run flags next to it (the old invocation still works)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from testutil.unit.gpuhandler.gpuhandler_fakes import SYSFS

from pkg.app.gpu_handler import main, parser, settings_from
from pkg.dra.model.slices import ServerVersion

PCI_IDS = Path(__file__).resolve().parents[3] / "test" / "fixtures" / "pci.ids"
HOST = SYSFS / "a30-x2"


def offers(*extra: str) -> list[str]:
    return ["offers", "--node-name=w1", f"--sysfs-root={HOST}", f"--host-root={HOST}", *extra]


def test_offers_prints_yaml_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(offers("--backend=simulated-nvidia", f"--pci-ids={PCI_IDS}", "--server-version=1.34"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("# What gpu-handler would publish on node w1")
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in docs] == ["PhysicalGPU", "PhysicalGPU", "ResourceSlice"]  # 1.34: inline
    assert docs[2]["spec"]["sharedCounters"]


def test_allow_mig_false_reaches_the_offers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(offers("--backend=simulated-nvidia", "--allow-mig=false")) == 0
    out = capsys.readouterr().out
    assert "gpu.deckhouse.io/allow-mig=false" in out
    assert "-mig-" not in out


def test_offers_show_where_each_card_sits(capsys: pytest.CaptureFixture[str]) -> None:
    hgx = SYSFS / "hgx-h100"
    argv = [
        "offers",
        "--node-name=w1",
        f"--sysfs-root={hgx}",
        f"--host-root={hgx}",
        "--backend=simulated-nvidia",
    ]
    assert main(argv) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    devices = [d for doc in docs if doc["kind"] == "ResourceSlice" for d in doc["spec"].get("devices") or ()]
    whole = next(d for d in devices if d["name"] == "gpu-0000-18-00-0")
    assert whole["attributes"]["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:15"}
    assert whole["attributes"]["resource.kubernetes.io/numaNode"] == {"int": 0}
    assert whole["attributes"]["gpu.deckhouse.io/nvlinkDomain"]["string"].startswith("nvswitch-")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["offers", "--node-name=w1", "--sysfs-root=/nonexistent"], "no bus/pci/devices"),
        (offers("--backend=intel"), "no vendor backend 'intel'"),
        (offers("--backend=simulated-nvidia", "--server-version=1.33"), "older than 1.34"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert message in err


@pytest.mark.parametrize(
    "argv",
    [
        ["offers", "--node-name=w1"],  # no --sysfs-root
        offers("--server-version=latest"),
        offers("--allow-mig=maybe"),
    ],
)
def test_unparsable_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "usage: gpu-handler offers" in capsys.readouterr().err


def test_a_missing_node_name_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(["offers", f"--sysfs-root={HOST}"]) == 2
    assert "--node-name" in capsys.readouterr().err


def test_a_card_that_cannot_be_read_exits_1(mocker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from pkg.backends.backend import BackendError
    from pkg.backends.nvidia.backend import NvidiaBackend

    mocker.patch.object(
        NvidiaBackend,
        "enrich",
        side_effect=BackendError(address="0000:3b:00.0", reason="GpuLost", message="lost"),
    )
    assert main(offers("--backend=simulated-nvidia")) == 1
    out, err = capsys.readouterr()
    assert "# Failed: w1-0-10de-20b7: GPU 0000:3b:00.0: lost" in out
    assert "problem(s)" in err


def test_the_run_invocation_is_unchanged_and_takes_the_publish_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PUBLISH", raising=False)
    args = parser().parse_args(["--node-name=n"])
    assert args.command is None
    defaults = settings_from(args)
    assert (defaults.publish, defaults.publish_resync_period) == (True, 300.0)
    tuned = settings_from(
        parser().parse_args(["--node-name=n", "--publish=false", "--publish-resync-period=30s"])
    )
    assert (tuned.publish, tuned.publish_resync_period) == (False, 30.0)
    monkeypatch.setenv("PUBLISH", "false")
    assert settings_from(parser().parse_args(["--node-name=n"])).publish is False


def test_offers_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "from-env")
    args = parser().parse_args(["offers", "--sysfs-root=/sys"])
    assert (args.command, args.node_name, args.backend) == ("offers", "from-env", "nvidia")
    assert (args.server_version, args.allow_mig, args.host_root) == (ServerVersion(1, 37), True, Path("/"))
