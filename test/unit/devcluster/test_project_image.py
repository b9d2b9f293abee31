"""The two ways of building the image cannot drift: the Containerfile and the local assembly run
the same steps of hack/image/assemble.sh over the same package list, and configure the image alike."""

from __future__ import annotations

import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from pkg.devcluster import projectimage
from pkg.devcluster.projectimage import IMAGE_ENV, IMAGE_USER, stage_packages

ROOT = Path(__file__).resolve().parents[3]
CONTAINERFILE = (ROOT / "Containerfile").read_text()
ASSEMBLE = ROOT / "hack" / "image" / "assemble.sh"


def containerfile_env() -> list[str]:
    """The ENV instruction's assignments (one instruction, continued over lines)."""
    block = re.search(r"^ENV (.+?)(?=^\S)", CONTAINERFILE, re.MULTILINE | re.DOTALL)
    assert block is not None
    return block.group(1).replace("\\\n", " ").split()


def test_the_containerfile_runs_every_step_the_local_build_runs() -> None:
    for step in ("install runtime", "install build", "wheels /src /wheels", "venv /wheels", "slim"):
        assert f"assemble.sh {step}" in CONTAINERFILE, step
    # The final stage installs the runtime packages only, and copies the virtualenv.
    final = CONTAINERFILE.split("\nFROM ${DEBIAN_IMAGE}\n", 1)[1]
    assert "install build" not in final
    assert "pip" not in final.replace("/tmp/pip", "")
    assert f"COPY --from=build {projectimage.VENV} {projectimage.VENV}" in final


def test_the_image_configuration_is_the_containerfiles() -> None:
    assert containerfile_env() == list(IMAGE_ENV)
    assert f"\nUSER {IMAGE_USER}\n" in CONTAINERFILE


def test_both_paths_read_one_package_list() -> None:
    for stage in ("runtime", "build"):
        listed = subprocess.run([ASSEMBLE, "packages", stage], capture_output=True, text=True, check=True)
        assert listed.stdout.split() == stage_packages(ROOT, stage)
    # What the node components exec: python3, and nsenter, unshare, mount and sh for the MPS daemon.
    assert {"python3", "util-linux", "mount", "dash"} <= set(stage_packages(ROOT, "runtime"))
    assert "python3-venv" not in stage_packages(ROOT, "runtime")


def test_an_unknown_stage_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'debug'"):
        stage_packages(ROOT, "debug")


def test_a_layer_is_reproducible_and_leaves_runtime_folders_empty(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for folder in ("usr/bin", "proc/1", "dev/pts", "tmp"):
        (root / folder).mkdir(parents=True)
    (root / "usr" / "bin" / "tool").write_text("#!/bin/sh\n")
    (root / "proc" / "1" / "status").write_text("x")
    (root / "usr" / "bin" / "sh").symlink_to("dash")
    first, second = tmp_path / "a.tar", tmp_path / "b.tar"
    projectimage._write_layer(root, first)
    (root / "usr" / "bin" / "tool").touch()  # a new mtime changes nothing
    projectimage._write_layer(root, second)
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as layer:
        names = layer.getnames()
        assert {m.mtime for m in layer.getmembers()} == {0}
    assert "proc" in names
    assert "dev" in names
    assert "proc/1" not in names
    assert "dev/pts" not in names
    assert "usr/bin/tool" in names
    assert "usr/bin/sh" in names
