"""The character majors of ``/proc/devices``: only the character section counts, and an unreadable
file is no major at all."""

from __future__ import annotations

from pathlib import Path

from pkg.hardware.proc_devices import character_major, character_majors

REAL_H200_HOST = """Character devices:
  1 mem
195 nvidia-frontend
234 nvidia-caps
242 nvidia-caps-imex-channels
508 nvidia-uvm

Block devices:
  7 loop
243 nvidia-caps-imex-channels-block-lookalike
"""


def test_the_character_section_is_read_by_name(tmp_path: Path) -> None:
    (tmp_path / "devices").write_text(REAL_H200_HOST)

    majors = character_majors(tmp_path)

    assert majors["nvidia-caps-imex-channels"] == 242
    assert majors["nvidia-caps"] == 234
    assert "loop" not in majors  # a block device
    assert character_major(tmp_path, "nvidia-caps-imex-channels") == 242


def test_a_device_the_kernel_does_not_list_or_a_missing_file_has_no_major(tmp_path: Path) -> None:
    assert character_major(tmp_path, "nvidia-caps-imex-channels") is None
    (tmp_path / "devices").write_text("Character devices:\n  1 mem\n")
    assert character_major(tmp_path, "nvidia-caps-imex-channels") is None
