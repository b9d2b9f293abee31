"""The node's files for prepared claims: checkpoint, CDI specs, the node lock, atomic writes."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pkg.backends.preparation import ContainerEdits, DeviceNode
from pkg.devcluster.cluster import default_bin_dir
from pkg.gpuhandler.node_lock import NodeLockTimeoutError, node_lock
from pkg.gpuhandler.preparation.atomic_file import write_atomically
from pkg.gpuhandler.preparation.cdi import CdiSpecs, build_spec, device_id
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointData,
    CheckpointError,
    CheckpointFile,
    ClaimRecord,
    DeviceRecord,
    PreparePhase,
    checksum,
)
from pkg.gpuhandler.preparation.kinds.mig import MigRecord
from pkg.gpuhandler.preparation.setup import RECORD_TYPES

UID = "8d1e4c2a-3b5f-4e6d-9a7b-1c2d3e4f5a6b"


def _claim(uid: str = UID, *, state: PreparePhase = PreparePhase.PREPARE_COMPLETED) -> ClaimRecord:
    return ClaimRecord(
        uid=uid,
        namespace="team-a",
        name="train",
        state=state,
        devices=[
            DeviceRecord(
                pool="gpus/node-a",
                device="gpu-0000-3b-00-0-mig-14-3",
                requests=["gpu"],
                card="0000:3b:00.0",
                device_type="MIG",
                mig=MigRecord(
                    profile_id=14, placement_start=3, placement_size=1, gpu_instance=5, compute_instance=0
                ),
                cdi_device_ids=[device_id(uid, "gpu-0000-3b-00-0-mig-14-3")],
            )
        ],
    )


# -- checkpoint -------------------------------------------------------------------------------------


def test_a_saved_checkpoint_reads_back_the_same(tmp_path: Path) -> None:
    file = CheckpointFile(tmp_path / "checkpoint.json", RECORD_TYPES)
    data = CheckpointData(boot_id="boot-1", claims={UID: _claim()})

    file.save(data)

    assert file.load(boot_id="boot-2") == data  # the stored boot is kept, not the caller's
    assert (tmp_path / "checkpoint.json").stat().st_mode & 0o777 == 0o600


def test_no_file_is_an_empty_checkpoint_of_this_boot(tmp_path: Path) -> None:
    data = CheckpointFile(tmp_path / "missing.json", RECORD_TYPES).load(boot_id="boot-1")

    assert data == CheckpointData(boot_id="boot-1")


def test_fields_of_a_newer_release_verify_and_survive_a_rewrite(tmp_path: Path) -> None:
    """The upgrade (and downgrade) failure of checksums over a reader's own struct cannot happen."""
    newer = CheckpointData(boot_id="b", claims={UID: _claim()}).model_dump(mode="json", by_alias=True)
    newer["futureTopLevel"] = {"x": 1}
    newer["claims"][UID]["devices"][0]["mdev"] = {"uuid": "aa618089"}
    path = tmp_path / "checkpoint.json"
    path.write_text(
        json.dumps({"version": 7, "minReaderVersion": 1, "checksum": checksum(newer), "data": newer})
    )
    file = CheckpointFile(path, RECORD_TYPES)

    data = file.load(boot_id="b")
    data.claims[UID].state = PreparePhase.PREPARE_STARTED  # this release changes what it knows
    file.save(data)

    stored = json.loads(path.read_text())["data"]
    assert stored["futureTopLevel"] == {"x": 1}
    assert stored["claims"][UID]["devices"][0]["mdev"] == {"uuid": "aa618089"}
    assert stored["claims"][UID]["state"] == "PrepareStarted"
    assert file.load(boot_id="b").claims[UID].state is PreparePhase.PREPARE_STARTED


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "is not JSON"),
        (b"\xff\xfe", "is not JSON"),
        (b"[]", "has no data object"),
        (
            json.dumps({"minReaderVersion": RECORD_TYPES.format_version + 1, "data": {}}).encode(),
            f"needs a reader of format version {RECORD_TYPES.format_version + 1}",
        ),
        (
            json.dumps({"minReaderVersion": 1, "checksum": "sha256:00", "data": {"bootID": "b"}}).encode(),
            "checksum mismatch",
        ),
    ],
)
def test_an_untrustworthy_checkpoint_is_refused_and_left_alone(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_bytes(content)

    with pytest.raises(CheckpointError, match=problem) as raised:
        CheckpointFile(path, RECORD_TYPES).load(boot_id="b")

    assert str(path) in str(raised.value)
    assert path.read_bytes() == content


def test_a_changed_byte_fails_the_checksum(tmp_path: Path) -> None:
    file = CheckpointFile(tmp_path / "checkpoint.json", RECORD_TYPES)
    file.save(CheckpointData(boot_id="b", claims={UID: _claim()}))
    file.path.write_text(file.path.read_text().replace('"gpuInstance": 5', '"gpuInstance": 6'))

    with pytest.raises(CheckpointError, match="checksum mismatch"):
        file.load(boot_id="b")


def test_the_checkpoint_finds_the_claims_on_a_card() -> None:
    data = CheckpointData(boot_id="b", claims={UID: _claim()})

    assert [c.uid for c in data.claims_on_card("0000:3b:00.0")] == [UID]
    assert data.claims_on_card("0000:86:00.0") == []


# -- atomic files -----------------------------------------------------------------------------------


def _write_then_die(path: str) -> None:
    original = os.replace

    def die(*_args: object) -> None:  # killed between the temporary file and the rename
        os.kill(os.getpid(), signal.SIGKILL)

    os.replace = die  # type: ignore[assignment]
    try:
        write_atomically(Path(path), b"new content")
    finally:
        os.replace = original


def test_a_write_killed_before_the_rename_leaves_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "file.json"
    target.write_bytes(b"old content")
    child = multiprocessing.get_context("fork").Process(target=_write_then_die, args=(str(target),))
    child.start()
    child.join(10)

    assert child.exitcode == -signal.SIGKILL
    assert target.read_bytes() == b"old content"
    write_atomically(target, b"next")  # the leftover temporary file is simply replaced
    assert target.read_bytes() == b"next"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json"]


# -- node lock --------------------------------------------------------------------------------------


def _hold_lock(path: str, held: multiprocessing.synchronize.Event) -> None:
    with node_lock(Path(path), timeout=5):
        held.set()
        time.sleep(60)


def test_the_node_lock_excludes_and_is_released_when_its_holder_dies(tmp_path: Path) -> None:
    lock = tmp_path / "node.lock"
    context = multiprocessing.get_context("fork")
    held = context.Event()
    holder = context.Process(target=_hold_lock, args=(str(lock), held))
    holder.start()
    assert held.wait(10)

    with pytest.raises(NodeLockTimeoutError, match=str(lock)), node_lock(lock, timeout=0.2):
        pass
    os.kill(holder.pid or 0, signal.SIGKILL)
    holder.join(10)
    with node_lock(lock, timeout=2):
        pass


# -- CDI --------------------------------------------------------------------------------------------


def _mig_edits() -> ContainerEdits:
    return ContainerEdits(
        device_nodes=(
            DeviceNode(path="/dev/nvidia0", host_path="/host/dev/nvidia0"),
            DeviceNode(path="/dev/nvidia-caps/nvidia-cap57", host_path="/host/dev/nvidia-caps/nvidia-cap57"),
        ),
        env=(("NVIDIA_VISIBLE_DEVICES", "MIG-1b2c3d4e-0000-5555-aaaa-0123456789ab"),),
    )


def test_a_claim_spec_names_each_device_after_the_claim() -> None:
    spec = build_spec(UID, {"gpu-0000-3b-00-0-mig-14-3": _mig_edits()})

    assert spec == {
        "cdiVersion": "0.5.0",  # hostPath is the newest field used
        "kind": "k8s.gpu.deckhouse.io/claim",
        "devices": [
            {
                "name": f"{UID}-gpu-0000-3b-00-0-mig-14-3",
                "containerEdits": {
                    "env": ["NVIDIA_VISIBLE_DEVICES=MIG-1b2c3d4e-0000-5555-aaaa-0123456789ab"],
                    "deviceNodes": [
                        {"path": "/dev/nvidia0", "hostPath": "/host/dev/nvidia0"},
                        {
                            "path": "/dev/nvidia-caps/nvidia-cap57",
                            "hostPath": "/host/dev/nvidia-caps/nvidia-cap57",
                        },
                    ],
                },
            }
        ],
    }


def test_the_cdi_loader_that_runtimes_use_accepts_our_specs(tmp_path: Path) -> None:
    specs = CdiSpecs(tmp_path)
    physical = ContainerEdits(
        device_nodes=(DeviceNode(path="/dev/nvidia1", host_path="/host/dev/nvidia1"),), env=(("A", "b=c"),)
    )
    ids = specs.write(UID, {"gpu-0000-3b-00-0-mig-14-3": _mig_edits(), "gpu-0000-86-00-0": physical})

    result = subprocess.run(
        [str(default_bin_dir() / "cdi-validate"), str(specs.path_of(UID))],
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split(": ", 1)[1].split() == sorted(ids)


def test_the_cdi_loader_check_is_not_vacuous(tmp_path: Path) -> None:
    spec = build_spec(UID, {"gpu-a": _mig_edits()})
    spec["cdiVersion"] = "0.4.0"  # too old for hostPath
    path = tmp_path / "old.json"
    path.write_text(json.dumps(spec))

    result = subprocess.run(
        [str(default_bin_dir() / "cdi-validate"), str(path)], capture_output=True, text=True, check=False
    )

    assert result.returncode == 1
    assert "must be at least v0.5.0" in result.stderr


def test_a_device_without_edits_is_refused() -> None:
    with pytest.raises(ValueError, match=f"claim {UID}: device gpu-a has no container edits"):
        build_spec(UID, {"gpu-a": ContainerEdits()})


def test_spec_files_are_found_by_claim_and_foreign_files_are_left_alone(tmp_path: Path) -> None:
    specs = CdiSpecs(tmp_path)
    other = "0a0a0a0a-0000-4000-8000-000000000000"
    specs.write(UID, {"gpu-a": _mig_edits()})
    specs.write(other, {"gpu-b": _mig_edits()})
    (tmp_path / "nvidia.yaml").write_text("foreign")

    assert specs.claims() == {UID: specs.path_of(UID), other: specs.path_of(other)}
    assert specs.remove_all_but([UID]) == [other]
    assert sorted(p.name for p in tmp_path.iterdir()) == [specs.path_of(UID).name, "nvidia.yaml"]
    assert specs.remove(UID) is True
    assert specs.remove(UID) is False
