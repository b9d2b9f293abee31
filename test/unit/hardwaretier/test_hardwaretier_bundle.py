"""The bundle's config is runc's default with only the tier's changes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from testutil.tools import require_program

from pkg.hardwaretier.bundle import (
    PATH_ENV,
    BundleError,
    cgroups_path,
    container_config,
    runc_spec,
    write_config,
)


@pytest.fixture
def runc() -> Path:
    return require_program("runc", "make host-packages installs it")


@pytest.fixture
def defaults(runc: Path, tmp_path: Path) -> dict[str, Any]:
    return runc_spec(runc, tmp_path / "bundle")


def test_the_program_runs_in_a_writable_root_without_a_terminal(defaults: dict[str, Any]) -> None:
    config = container_config(
        defaults, args=["/usr/local/bin/cuda_ok", "5"], cgroups_path="/gpu-cp-hardware-tier-x"
    )

    assert config["root"] == {"path": "rootfs", "readonly": False}
    assert config["process"]["args"] == ["/usr/local/bin/cuda_ok", "5"]
    assert config["process"]["terminal"] is False
    assert config["process"]["env"] == [PATH_ENV]
    assert config["linux"]["cgroupsPath"] == "/gpu-cp-hardware-tier-x"


def test_everything_else_stays_as_runc_makes_it(defaults: dict[str, Any]) -> None:
    before = copy.deepcopy(defaults)

    config = container_config(defaults, args=["/bin/sh"], cgroups_path=cgroups_path("x"))

    assert defaults == before, "the defaults passed in are not modified"
    assert config["linux"]["namespaces"] == defaults["linux"]["namespaces"]
    assert config["linux"]["resources"]["devices"] == [{"allow": False, "access": "rwm"}], (
        "every device denied"
    )
    assert config["mounts"] == defaults["mounts"]
    assert config["process"]["capabilities"] == defaults["process"]["capabilities"]


def test_a_container_without_a_command_is_refused() -> None:
    with pytest.raises(BundleError, match="a container needs a command"):
        container_config({}, args=[], cgroups_path="/x")


def test_the_cgroup_sits_directly_under_the_root_so_runc_removes_all_of_it() -> None:
    assert cgroups_path("whole-card-1a2b") == "/gpu-cp-hardware-tier-whole-card-1a2b"


def test_runc_spec_replaces_an_old_config(runc: Path, defaults: dict[str, Any], tmp_path: Path) -> None:
    write_config(tmp_path / "bundle", {"ociVersion": "old"})

    again = runc_spec(runc, tmp_path / "bundle")

    assert again == defaults
