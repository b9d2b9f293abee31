"""The host info service: host files read under --host-root as the host would resolve them."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from testutil.unit.nodeagent.nodeagent_fakes import SYSFS

from pkg.inventory.host_info import FileHostInfoReader, resolve_in_root


def test_absolute_links_resolve_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "etc").mkdir()
    (tmp_path / "usr/lib/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    os.symlink("/usr/lib/os-release", tmp_path / "etc/os-release")  # as on most distributions
    assert resolve_in_root(tmp_path, "/etc/os-release") == tmp_path / "usr/lib/os-release"
    info = FileHostInfoReader(host_root=tmp_path, sysfs_root=tmp_path / "sys").read()
    assert (info.os_id, info.os_version) == ("debian", "12")


def test_relative_links_and_dot_dot_stay_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a/file").write_text("x")
    os.symlink("../../../a/file", tmp_path / "link")  # would escape the root on a naive resolve
    assert resolve_in_root(tmp_path, "/link") == tmp_path / "a/file"


def test_a_link_loop_is_an_error(tmp_path: Path) -> None:
    os.symlink("/loop", tmp_path / "loop")
    with pytest.raises(OSError, match="symbolic links") as raised:
        resolve_in_root(tmp_path, "/loop")
    assert raised.value.errno == errno.ELOOP
    info = FileHostInfoReader(host_root=tmp_path, sysfs_root=tmp_path).read()  # and never a crash
    assert info.os_id is None


def test_usr_lib_os_release_is_the_fallback(tmp_path: Path) -> None:
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/os-release").write_text("ID=fedora\n")
    assert FileHostInfoReader(host_root=tmp_path, sysfs_root=tmp_path).read().os_id == "fedora"


@pytest.mark.parametrize(("scenario", "bare_metal"), [("a30-x2", True), ("vm-dmi", False)])
def test_fixture_hosts(scenario: str, bare_metal: bool) -> None:
    root = SYSFS / scenario
    info = FileHostInfoReader(host_root=root, sysfs_root=root).read()
    assert info.bare_metal is bare_metal
    assert info.os_id
    assert info.kernel_release
