"""A missing tool skips a test run by hand and fails one run by the Makefile's test targets."""

from __future__ import annotations

from pathlib import Path

import pytest
from testutil.tools import REQUIRE_TOOLS, require, require_file, require_program


def test_a_present_tool_lets_the_test_go_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(REQUIRE_TOOLS, "1")
    (tmp_path / "tool").write_text("")

    require(True, "never said")
    assert require_file(tmp_path / "tool", "a hint") == tmp_path / "tool"


def test_a_missing_tool_skips_by_hand(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(REQUIRE_TOOLS, raising=False)

    with pytest.raises(pytest.skip.Exception, match=r"no .*/busybox \(make host-packages installs it\)"):
        require_file(tmp_path / "busybox", "make host-packages installs it")


def test_a_missing_tool_fails_when_the_test_targets_promised_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_TOOLS, "1")
    monkeypatch.setenv("PATH", "")

    with pytest.raises(pytest.fail.Exception, match=rf"no runc \(a hint\); {REQUIRE_TOOLS}=1"):
        require_program("runc", "a hint")


def test_only_the_value_1_promises_the_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_TOOLS, "0")

    with pytest.raises(pytest.skip.Exception):
        require(False, "missing")
