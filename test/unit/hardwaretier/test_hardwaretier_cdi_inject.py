"""``cdi-validate inject`` — the CDI library's own cache and InjectDevices — applies named devices
to a bundle's config.json, and refuses, naming them, devices no spec defines."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from testutil.tools import require_program

from pkg.devcluster.cluster import default_bin_dir
from pkg.hardwaretier.bundle import container_config, runc_spec, write_config
from pkg.hardwaretier.cdi_inject import InjectError, find_cdi_tool, find_tool, inject

SPEC = {
    "cdiVersion": "0.5.0",
    "kind": "example.com/gpu",
    "containerEdits": {"env": ["FROM_THE_SPEC=1"]},
    "devices": [
        {
            "name": "card",
            "containerEdits": {
                "env": ["CARD=a"],
                "deviceNodes": [{"path": "/dev/card0", "hostPath": "/dev/null"}],
                "mounts": [
                    {"hostPath": "/etc/hostname", "containerPath": "/etc/card", "options": ["ro", "bind"]}
                ],
            },
        },
        {"name": "other", "containerEdits": {"env": ["OTHER=b"]}},
    ],
}


@pytest.fixture
def tool() -> Path:
    return default_bin_dir() / "cdi-validate"


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    folder = tmp_path / "cdi"
    folder.mkdir()
    (folder / "example.json").write_text(json.dumps(SPEC))
    return folder


@pytest.fixture
def config(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    base = runc_spec(require_program("runc", "make host-packages installs it"), bundle)
    return write_config(bundle, container_config(base, args=["/bin/sh"], cgroups_path="/x"))


def _read(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_the_named_devices_and_their_spec_edits_reach_the_config(
    tool: Path, specs: Path, config: Path
) -> None:
    report = inject(tool, spec_dirs=[specs], config=config, devices=["example.com/gpu=card"])

    edited = _read(config)
    assert report == "injected: example.com/gpu=card"
    assert {"FROM_THE_SPEC=1", "CARD=a"} <= set(edited["process"]["env"])
    assert "OTHER=b" not in edited["process"]["env"], "only the named device"
    [node] = edited["linux"]["devices"]
    assert (node["path"], node["type"], node["major"], node["minor"]) == ("/dev/card0", "c", 1, 3)
    allowed = [rule for rule in edited["linux"]["resources"]["devices"] if rule["allow"]]
    assert [(rule["major"], rule["minor"]) for rule in allowed] == [(1, 3)], (
        "the device cgroup lets it through"
    )
    [mount] = [m for m in edited["mounts"] if m["destination"] == "/etc/card"]
    assert (mount["source"], mount["options"]) == ("/etc/hostname", ["ro", "bind"])


def test_unresolved_devices_are_listed_and_the_config_is_left_alone(
    tool: Path, specs: Path, config: Path
) -> None:
    before = config.read_bytes()

    with pytest.raises(
        InjectError, match=r"unresolved CDI devices in .*: example.com/gpu=gone k8s.example/x=y"
    ):
        inject(tool, spec_dirs=[specs], config=config, devices=["example.com/gpu=gone", "k8s.example/x=y"])

    assert config.read_bytes() == before


def test_a_spec_the_library_cannot_load_is_named_beside_the_unresolved_device(
    tool: Path, specs: Path, config: Path
) -> None:
    (specs / "broken.json").write_text('{"cdiVersion": "0.5.0", "kind": "broken.example/gpu"')

    with pytest.raises(InjectError, match=r"(?s)broken.example/gpu=a.*could not load:.*broken.json"):
        inject(tool, spec_dirs=[specs], config=config, devices=["broken.example/gpu=a"])


def test_a_missing_spec_folder_is_named_not_taken_for_an_empty_one(
    tool: Path, tmp_path: Path, config: Path
) -> None:
    with pytest.raises(InjectError, match=rf"spec folder {tmp_path}/nowhere: .*no such file"):
        inject(tool, spec_dirs=[tmp_path / "nowhere"], config=config, devices=["example.com/gpu=card"])


def test_bad_usage_exits_2_and_a_refusal_exits_1(tool: Path, specs: Path, config: Path) -> None:
    usage = subprocess.run(
        [str(tool), "inject", "--config", str(config), "a/b=c"], capture_output=True, text=True, check=False
    )
    refused = subprocess.run(
        [str(tool), "inject", "--spec-dir", str(specs), "--config", str(config), "a.b/c=d"],
        capture_output=True,
        text=True,
        check=False,
    )

    assert (usage.returncode, refused.returncode) == (2, 1)
    assert "no --spec-dir given" in usage.stderr
    assert "usage: cdi-validate FILE..." in usage.stderr


def test_the_tool_is_found_in_the_bin_dir_then_on_path(tmp_path: Path) -> None:
    bin_dir, on_path = tmp_path / "bin", tmp_path / "path"
    for folder in (bin_dir, on_path):
        folder.mkdir()
        (folder / "cdi-validate").write_text("#!/bin/sh\n")
        (folder / "cdi-validate").chmod(0o755)

    assert find_cdi_tool({"GPU_CP_BIN_DIR": str(bin_dir), "PATH": str(on_path)}) == bin_dir / "cdi-validate"
    assert find_cdi_tool({"GPU_CP_BIN_DIR": str(tmp_path), "PATH": str(on_path)}) == on_path / "cdi-validate"
    assert find_cdi_tool({"PATH": str(on_path)}) == on_path / "cdi-validate"


def test_a_missing_tool_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as error:
        find_cdi_tool({"GPU_CP_BIN_DIR": str(tmp_path), "PATH": os.fspath(tmp_path)})

    message = str(error.value)
    assert f"$GPU_CP_BIN_DIR={tmp_path} has no executable cdi-validate" in message
    assert "bash hack/tools/build.sh cdi" in message


def test_the_hook_program_is_found_by_the_same_rule_and_named_by_its_module(tmp_path: Path) -> None:
    with pytest.raises(
        FileNotFoundError, match=r"nvidia-cdi-hook is not on PATH: .*build.sh nvidia-cdi-hook\)"
    ):
        find_tool("nvidia-cdi-hook", module="nvidia-cdi-hook", env={"PATH": os.fspath(tmp_path)})
