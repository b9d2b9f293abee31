"""The processes on an AMD card come from the KFD's per-process files: VRAM summed over the card's
partitions (its KFD nodes), other cards' nodes ignored, no compute share or energy claimed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkg.backends.amd.usage import read_usage
from pkg.backends.backend import BackendError

CARD = "0000:0c:00.0"  # location_id (0x0c << 8) = 3072
OTHER = "0000:22:00.0"  # 8704


def kfd_node(root: Path, index: int, *, location: int, gpu_id: int) -> None:
    node = root / "class/kfd/kfd/topology/nodes" / str(index)
    node.mkdir(parents=True)
    (node / "properties").write_text(f"domain 0\nlocation_id {location}\ndrm_render_minor {128 + index}\n")
    (node / "gpu_id").write_text(f"{gpu_id}\n")


def process(root: Path, pid: int, vram: dict[int, int]) -> None:
    folder = root / "class/kfd/kfd/proc" / str(pid)
    folder.mkdir(parents=True)
    for gpu_id, value in vram.items():
        (folder / f"vram_{gpu_id}").write_text(f"{value}\n")


def test_vram_is_summed_over_the_cards_partitions_and_other_cards_are_left_out(tmp_path: Path) -> None:
    kfd_node(tmp_path, 0, location=0, gpu_id=0)  # the CPU node: no card's
    kfd_node(tmp_path, 1, location=3072, gpu_id=1111)
    kfd_node(tmp_path, 2, location=3072, gpu_id=2222)  # a second partition of the card
    kfd_node(tmp_path, 3, location=8704, gpu_id=3333)
    process(tmp_path, 41, {1111: 1 << 30, 2222: 1 << 29})
    process(tmp_path, 42, {3333: 5 << 30})  # on the other card only

    usage = read_usage(tmp_path, CARD, "0x1234")

    [found] = usage.processes
    assert (found.pid, found.memory_bytes, found.device_uuid) == (41, (1 << 30) + (1 << 29), "0x1234")
    assert found.sm_percent is None
    assert usage.energy_mj is None
    assert [p.pid for p in read_usage(tmp_path, OTHER, "0x9").processes] == [42]


def test_no_kfd_process_folder_is_an_idle_card(tmp_path: Path) -> None:
    kfd_node(tmp_path, 1, location=3072, gpu_id=1111)

    assert read_usage(tmp_path, CARD, "0x1234").processes == ()


def test_a_card_without_a_unique_id_cannot_report_processes(tmp_path: Path) -> None:
    with pytest.raises(BackendError) as failed:
        read_usage(tmp_path, CARD, None)
    assert failed.value.reason == "NoUniqueId"
