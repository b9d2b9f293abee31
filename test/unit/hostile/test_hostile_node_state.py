"""Family 6: hostile node state — the checkpoint, the files gpu-handler writes, and claim UIDs.

Every case runs in a bounded child (:mod:`bounded`): a checkpoint that is huge, endless, a FIFO,
deeply nested or holds enormous numbers must be answered with ``CheckpointUnreadable`` naming the
file (and the claim, where one record is at fault) within the bounds, never hang, exhaust memory
or be taken for "no checkpoint". A claim UID with path characters is refused before it becomes a
path, and nothing outside the plugin's folders changes. Writes never follow a link and a failed
write leaves the previous file and no temporary file.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ResourceV1ResourceClaim, V1ObjectMeta
from pytest_mock import MockerFixture
from testutil.unit.hostile.bounded import run_bounded

from pkg.backends.preparation import ContainerEdits
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation import atomic_file, kinds
from pkg.gpuhandler.preparation.atomic_file import AtomicWriteError, write_atomically
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import (
    MAX_BYTES,
    CheckpointData,
    CheckpointFile,
    CheckpointUnreadable,
    ClaimRecord,
    DeviceRecord,
    PreparePhase,
    checksum,
)
from pkg.gpuhandler.preparation.claim_ref import InvalidClaimRefError, validate_claim_ref
from pkg.gpuhandler.preparation.driver import GpuDriver
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds.share.card_sharing import SharingRecord
from pkg.gpuhandler.preparation.kinds.vm.files import VmFiles
from pkg.gpuhandler.preparation.setup import RECORD_TYPES

UID = "8d1e4c2a-3b5f-4e6d-9a7b-1c2d3e4f5a6b"
OTHER = "0f9e8d7c-6b5a-4948-8372-615049382716"


def _record(uid: str = UID, *, sharing: SharingRecord | None = None) -> ClaimRecord:
    device = DeviceRecord(
        pool="node-a", device="gpu-0", card="0000:3b:00.0", device_type="Physical", sharing=sharing
    )
    return ClaimRecord(
        uid=uid, namespace="ns", name="c", state=PreparePhase.PREPARE_COMPLETED, devices=[device]
    )


def _body(*records: ClaimRecord) -> dict[str, Any]:
    data = CheckpointData(boot_id="boot", claims={r.uid: r for r in records})
    body: dict[str, Any] = data.model_dump(mode="json", by_alias=True)
    return body


def _envelope(body: dict[str, Any], *, min_reader: Any = 1) -> bytes:
    document = {"version": 3, "minReaderVersion": min_reader, "checksum": checksum(body), "data": body}
    return json.dumps(document).encode()


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: a file's bytes, a link's target, a folder's or FIFO's kind."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            found[name] = "-> " + os.readlink(path)
        elif path.is_file():
            found[name] = path.read_bytes()
        else:
            found[name] = "dir" if path.is_dir() else "special"
    return found


def _load_error(path: Path) -> str:
    """In the child: what loading the checkpoint at ``path`` answers (the error, or the claims)."""
    try:
        data = CheckpointFile(path, RECORD_TYPES).load(boot_id="now")
    except CheckpointUnreadable as exc:
        return f"CheckpointUnreadable: {exc}"
    return f"loaded {sorted(data.claims)}"


def _refused(path: Path, *expected: str) -> str:
    before = _snapshot(path.parent)
    answer = run_bounded(_load_error, path)
    assert answer.startswith("CheckpointUnreadable: "), answer
    assert str(path) in answer
    for text in expected:
        assert text in answer, answer
    assert _snapshot(path.parent) == before  # a refused checkpoint is never rewritten or removed
    return answer


# -- reading: what is at the path ------------------------------------------------------------------


def test_a_file_over_the_size_limit_is_refused_without_being_read(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    with path.open("wb") as file:
        file.truncate(MAX_BYTES + 1)  # sparse: megabytes of zeros that cost no disk
    _refused(path, "over the limit")


def test_an_endless_file_and_a_fifo_are_answered_at_once(tmp_path: Path) -> None:
    endless = tmp_path / "endless.json"
    endless.symlink_to("/dev/zero")
    _refused(endless, "symbolic link")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # nobody writes: a blocking open or read would wait forever
    _refused(fifo, "not a regular file (a FIFO)")


def test_a_dangling_link_a_folder_and_an_unopenable_path_are_not_no_checkpoint(tmp_path: Path) -> None:
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere.json")
    _refused(dangling, "symbolic link")
    linked = tmp_path / "linked.json"
    (tmp_path / "real.json").write_bytes(_envelope(_body(_record())))
    linked.symlink_to(tmp_path / "real.json")  # ours are renamed in place, never links
    _refused(linked, "symbolic link")
    folder = tmp_path / "folder.json"
    folder.mkdir()
    _refused(folder, "a folder")
    (tmp_path / "file").write_bytes(b"")
    _refused(tmp_path / "file" / "checkpoint.json", "cannot be opened")
    assert run_bounded(_load_error, tmp_path / "absent.json") == "loaded []"  # the only "none"


# -- reading: what is in the file ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(b"[" * 200_000 + b"]" * 200_000, "nests deeper than 32", id="deep-list"),
        pytest.param(b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nests deeper than 32", id="deep-object"),
        pytest.param(
            b'{"data": {"n": 1' + b"0" * 100_000 + b"}}", "number of 100001 digits", id="10**100000"
        ),
        pytest.param(
            b'{"data": {"n": 1' + b"0" * 5000 + b".5}}", "number of 5003 characters", id="long-float"
        ),
        pytest.param(b'{"data": {"n": 1e999}}', "too large", id="1e999"),
        pytest.param(b'{"data": {"n": NaN}}', "not JSON", id="NaN"),
        pytest.param(b"\xff\xfe{}", "not JSON", id="not-utf8"),
        pytest.param(b"", "not JSON", id="empty"),
        pytest.param(b"[]", "no data object", id="not-an-object"),
        pytest.param(
            b'{"minReaderVersion": 1, "data": {"n": [' + b"0," * 8_000_000 + b"0]}}",
            "checksum mismatch",
            id="wide",
        ),
    ],
)
def test_malformed_content_is_unreadable_within_bounds(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_bytes(content)
    _refused(path, expected)


@pytest.mark.parametrize("devices", [5, "x", {"a": 1}, [5], None])
def test_records_of_the_wrong_shape_are_invalid_content(tmp_path: Path, devices: Any) -> None:
    body = _body(_record())
    body["claims"][UID]["devices"] = devices
    path = tmp_path / "checkpoint.json"
    path.write_bytes(_envelope(body))
    _refused(path, "invalid content")


def test_brackets_inside_strings_are_not_nesting(tmp_path: Path) -> None:
    body = _body(_record())
    body["claims"][UID]["note"] = "[{" * 1000  # a newer release's field, kept
    path = tmp_path / "checkpoint.json"
    path.write_bytes(_envelope(body))
    assert run_bounded(_load_error, path) == f"loaded {[UID]}"


def test_a_record_not_under_its_own_uid_is_corrupt_not_a_second_claim(tmp_path: Path) -> None:
    body = _body(_record())
    body["claims"][OTHER] = _body(_record())["claims"][UID]  # the same record twice
    path = tmp_path / "checkpoint.json"
    path.write_bytes(_envelope(body))
    _refused(path, f"claim '{OTHER}'", f"of claim '{UID}'")


@pytest.mark.parametrize("uid", ["../../etc/x", "a/b", "", "8" * 5000, "a\x00b", f"{UID}/.."])
def test_a_record_whose_uid_is_a_path_is_corrupt(tmp_path: Path, uid: str) -> None:
    body = _body(_record())
    record = body["claims"].pop(UID)
    record["uid"] = uid
    body["claims"][uid] = record
    path = tmp_path / "checkpoint.json"
    path.write_bytes(_envelope(body))
    _refused(path, "is not a claim UID")


@pytest.mark.parametrize(
    ("where", "value", "expected"),
    [
        (("state",), "PrepareAborted", "invalid content"),
        (("devices", 0, "deviceType"), "VirtualFunction", "deviceType 'VirtualFunction' is unknown"),
        (("devices", 0, "sharing", "strategy"), "VGPU", "sharing strategy 'VGPU' is unknown"),
        (("devices", 0, "sharing", "interval"), "Forever", "time-slice interval 'Forever' is unknown"),
    ],
)
def test_an_enum_value_this_release_does_not_know_is_refused_naming_the_claim(
    tmp_path: Path, where: tuple[Any, ...], value: str, expected: str
) -> None:
    share = SharingRecord(strategy="MPS", share_percent=50, memory_mib=1024)
    body = _body(_record(sharing=share))
    target: Any = body["claims"][UID]
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = value
    path = tmp_path / "checkpoint.json"
    path.write_bytes(_envelope(body, min_reader=2))
    answer = _refused(path, expected)
    assert UID in answer


def test_fields_a_newer_release_adds_are_read_and_kept(tmp_path: Path) -> None:
    body = _body(_record())
    body["future"] = {"nested": [1, 2.5, "x"]}
    body["claims"][UID]["devices"][0]["fabric"] = {"clique": 7}
    path = tmp_path / "checkpoint.json"
    path.write_bytes(_envelope(body))
    file = CheckpointFile(path, RECORD_TYPES)
    file.save(file.load(boot_id="boot"))
    again = json.loads(path.read_bytes())["data"]
    assert again["future"] == {"nested": [1, 2.5, "x"]}
    assert again["claims"][UID]["devices"][0]["fabric"] == {"clique": 7}


@pytest.mark.parametrize("min_reader", [RECORD_TYPES.format_version + 1, 10**18, True, "1", None, 1.0])
def test_a_reader_version_this_release_is_not_is_refused(tmp_path: Path, min_reader: Any) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_bytes(_envelope(_body(_record()), min_reader=min_reader))
    _refused(path, "needs a reader of format version")


# -- claim references and paths --------------------------------------------------------------------

HOSTILE_UIDS = [
    "../../../victim",
    "../../etc/x",
    "a/b",
    "",
    "a" * 5000,
    "abc\x00def",
    f"{UID}/../x",
    f"{UID}\n",
]


def _plugin(tmp_path: Path) -> tuple[CdiSpecs, VmFiles, Path]:
    """The plugin's folders under ``tmp_path/plugin``, and a file outside them that must survive."""
    cdi, vm = tmp_path / "plugin" / "cdi", tmp_path / "plugin" / "vm"
    cdi.mkdir(parents=True)
    vm.mkdir(parents=True)
    (cdi / "k8s.gpu.deckhouse.io-claim_..").mkdir()  # makes "../" in a UID reach out of the folder
    victim = tmp_path / "victim.json"
    victim.write_bytes(b"not the plugin's")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep").write_bytes(b"keep")
    return CdiSpecs(cdi), VmFiles(vm), victim


@pytest.mark.parametrize("uid", HOSTILE_UIDS, ids=repr)
def test_a_uid_with_path_characters_never_becomes_a_path(tmp_path: Path, uid: str) -> None:
    specs, vm, _ = _plugin(tmp_path)
    before = _snapshot(tmp_path)
    edits = {"gpu-0": ContainerEdits(env=(("A", "1"),))}
    attempts: list[Callable[[], object]] = [
        lambda: specs.write(uid, edits),
        lambda: specs.remove(uid),
        lambda: specs.path_of(uid),
        lambda: vm.remove(uid),
        lambda: vm.claim_folder(uid),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidClaimRefError, match="is not a claim UID"):
            attempt()
    assert _snapshot(tmp_path) == before


def _claim(uid: Any = UID, name: Any = "claim-1", namespace: Any = "team-a") -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(metadata=V1ObjectMeta(uid=uid, name=name, namespace=namespace))


@pytest.mark.parametrize(
    "claim",
    [
        *(pytest.param(_claim(uid=uid), id=f"uid={uid[:20]!r}") for uid in HOSTILE_UIDS),
        pytest.param(_claim(uid=None), id="no-uid"),
        pytest.param(_claim(name="../x"), id="name-path"),
        pytest.param(_claim(name="a" * 254), id="name-too-long"),
        pytest.param(_claim(name="Claim"), id="name-upper"),
        pytest.param(_claim(namespace="a.b"), id="namespace-not-label"),
        pytest.param(_claim(namespace="a" * 64), id="namespace-too-long"),
        pytest.param(_claim(namespace=""), id="namespace-empty"),
        pytest.param(ResourceV1ResourceClaim(metadata=None), id="no-metadata"),
    ],
)
def test_validate_claim_ref_refuses_what_the_api_server_never_makes(claim: ResourceV1ResourceClaim) -> None:
    with pytest.raises(PrepareFailedError) as caught:
        validate_claim_ref(claim)
    assert caught.value.reason == "InvalidClaim"
    assert "\x00" not in str(caught.value)  # shown escaped
    assert len(str(caught.value)) < 400


def test_validate_claim_ref_passes_api_server_names_and_reads_records_too() -> None:
    validate_claim_ref(_claim(name="a." + "b" * 60, namespace="a" * 63))
    validate_claim_ref(_claim(uid=UID.upper()))
    validate_claim_ref(_record())  # anything with uid, namespace and name


def test_the_cdi_folder_scan_ignores_names_that_are_not_uids(tmp_path: Path) -> None:
    specs, _, _ = _plugin(tmp_path)
    (specs.folder / "k8s.gpu.deckhouse.io-claim_--.json").write_bytes(b"{}")
    (specs.folder / f"k8s.gpu.deckhouse.io-claim_{UID}.json").write_bytes(b"{}")
    assert list(specs.claims()) == [UID]


# -- writing ---------------------------------------------------------------------------------------


def test_a_link_planted_at_the_temporary_path_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, victim = tmp_path / "file.json", tmp_path / "victim"
    victim.write_bytes(b"victim")
    names = iter(["0" * 16, "1" * 16])
    monkeypatch.setattr(secrets, "token_hex", lambda _: next(names))
    monkeypatch.setattr(atomic_file, "_remove_leftovers", lambda _: None)  # the attacker is quicker
    (tmp_path / f".file.json.{'0' * 16}.tmp").symlink_to(victim)
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert victim.read_bytes() == b"victim"


def test_leftover_temporary_files_and_links_go_without_touching_their_targets(tmp_path: Path) -> None:
    target, victim = tmp_path / "file.json", tmp_path / "victim"
    victim.write_bytes(b"victim")
    (tmp_path / ".file.json.tmp").symlink_to(victim)  # the fixed name of earlier releases
    (tmp_path / f".file.json.{'a' * 16}.tmp").write_bytes(b"half")
    write_atomically(target, b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json", "victim"]
    assert victim.read_bytes() == b"victim"


@pytest.mark.parametrize(
    ("call", "code"),
    [("write", errno.ENOSPC), ("fsync", errno.EIO), ("replace", errno.EROFS), ("open", errno.EROFS)],
)
def test_a_failed_write_keeps_the_old_file_removes_its_temporary_and_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, code: int
) -> None:
    target = tmp_path / "checkpoint.json"
    target.write_bytes(b"old")
    real = getattr(os, call)

    def fail(*args: Any, **kwargs: Any) -> Any:
        if call == "open" and not str(args[0]).endswith(".tmp"):
            return real(*args, **kwargs)
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, call, fail)
    with pytest.raises(AtomicWriteError) as caught:
        write_atomically(target, b"new")
    monkeypatch.undo()
    assert caught.value.errno == code
    assert str(target) in str(caught.value)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json"]


def test_short_writes_are_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, bytes(data[:3])))
    write_atomically(tmp_path / "file", b"0123456789" * 10)
    assert (tmp_path / "file").read_bytes() == b"0123456789" * 10


def test_a_checkpoint_that_cannot_be_saved_names_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "checkpoint.json"
    file = CheckpointFile(path, RECORD_TYPES)
    file.save(CheckpointData(boot_id="boot"))
    before = path.read_bytes()
    monkeypatch.setattr(os, "fsync", lambda _: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    with pytest.raises(OSError, match=str(path)):
        file.save(CheckpointData(boot_id="boot", claims={UID: _record()}))
    monkeypatch.undo()
    assert path.read_bytes() == before


# -- plan: numbers from slices ---------------------------------------------------------------------


@pytest.mark.parametrize("text", ["1Ei", "10e100000", "9" * 5000, "2Pi"])
def test_quantities_beyond_any_card_are_refused(text: str) -> None:
    answer = run_bounded(_plan_error, kinds.quantity, text, "consumed memory", "claim ns/c")
    assert answer.startswith("PlanError: claim ns/c"), answer


@pytest.mark.parametrize(("value", "low", "high"), [(-1, 0, 63), (64, 0, 63), (0, 1, 64), (10**30, 1, 64)])
def test_placement_numbers_are_bounded(value: int, low: int, high: int) -> None:
    with pytest.raises(kinds.PlanError, match=f"not between {low} and {high}"):
        kinds.bounded(value, low, high, "placementStart", "claim ns/c")


@pytest.mark.parametrize("address", ["../../etc", "0000:3b:00.0/../x", "", "0000:3b:00.8", "0000:3b:00.0\n"])
def test_a_pci_address_that_is_a_path_is_refused(address: str) -> None:
    with pytest.raises(kinds.PlanError, match="not a PCI address"):
        kinds.pci_address(address, "claim ns/c")


def _plan_error(fn: Callable[..., Any], *args: Any) -> str:
    try:
        return f"returned {fn(*args)!r:.100}"
    except kinds.PlanError as exc:
        return f"PlanError: {exc}"


@pytest.mark.parametrize("operation", ["prepare", "unprepare"])
@pytest.mark.parametrize("uid", HOSTILE_UIDS, ids=repr)
def test_a_path_bearing_uid_is_refused_before_reading_or_writing_anything(
    tmp_path: Path, uid: str, operation: str, mocker: MockerFixture
) -> None:
    prepare, unprepare, listener, events, cards = (mocker.Mock() for _ in range(5))
    driver = GpuDriver(
        prepare=prepare,
        unprepare=unprepare,
        listener=listener,
        lock_path=tmp_path / "node.lock",
        lock_timeout=1.0,
        events=events,
        cards=cards,
        vendor="nvidia",
    )
    claim = ClaimRef(namespace="team", name="c", uid=uid)
    if operation == "prepare":
        assert "InvalidClaim" in driver.prepare([claim])[uid].error
    else:
        assert "is not a claim UID" in driver.unprepare([claim])[uid]
    for used in (prepare, unprepare, listener, cards):
        assert used.mock_calls == []  # no pipeline ran: nothing read, nothing written
    assert not (tmp_path / "node.lock").exists()  # not even the lock was taken
