"""Each device kind alone: ``prepare`` and ``release`` of one recorded device, on the simulated
backend, without the pipeline around it. What a kind is handed is a checkpoint record and the
claim's work (:class:`~pkg.gpuhandler.preparation.kinds.ClaimWork`); what it must leave is the card
in the expected state, the container edits for the device, and the cards and MIG modes it changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import A30, POOL, Node, node, whole_offer

from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord, DeviceRecord, PreparePhase
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import VFIO_ANNOTATION, ClaimWork, Kinds, UnknownKindError
from pkg.gpuhandler.preparation.kinds.mig import MigKind, mig_record
from pkg.gpuhandler.preparation.kinds.share import ShareKind
from pkg.gpuhandler.preparation.kinds.share.card_sharing import SharingRecord, share_of
from pkg.gpuhandler.preparation.kinds.vm.records import VfioFunctionRecord, VfioRecord, vfio_of
from pkg.gpuhandler.preparation.kinds.vm.vfio import VfioKind
from pkg.gpuhandler.preparation.kinds.whole_card import WholeCardKind

RTX = "0000:65:00.0"
RTX_AUDIO = "0000:65:00.1"
FIXTURE = Path(__file__).parent / "fixtures" / "checkpoint-before-kinds.json"


def _device(card: str = A30, **kinds: object) -> DeviceRecord:
    return DeviceRecord.model_validate(
        {
            "pool": POOL,
            "device": "gpu-x",
            "requests": ["gpu"],
            "card": card,
            "deviceType": "Physical",
            **kinds,
        }
    )


def _work(device: DeviceRecord, *others: ClaimRecord, uid: str = "u-1") -> ClaimWork:
    record = ClaimRecord(
        uid=uid, namespace="team", name="c", state=PreparePhase.PREPARE_STARTED, devices=[device]
    )
    claims = {c.uid: c for c in (record, *others)}
    return ClaimWork(record=record, checkpoint=CheckpointData(boot_id="b", claims=claims))


def _other_claim(device: DeviceRecord) -> ClaimRecord:
    return ClaimRecord(
        uid="u-2", namespace="team", name="other", state=PreparePhase.PREPARE_COMPLETED, devices=[device]
    )


def _mig_mode(n: Node, card: str = A30) -> bool:
    return bool(n.container.preparer().mig_enabled(card))


def _instances(n: Node, card: str = A30) -> list[int]:
    return [gi.start for gi in n.card_state(card).gpu_instances]


def _mig(start: int = 3) -> DeviceRecord:
    return _device(deviceType="MIG", mig={"profileID": 14, "placementStart": start, "placementSize": 1})


# -- the registry ---------------------------------------------------------------------------------------


def test_a_recorded_device_is_of_the_kind_its_record_marks(tmp_path: Path, mocker: MockerFixture) -> None:
    kinds: Kinds = node(mocker, tmp_path).container.kinds()
    vfio = VfioRecord(iommu_group="28", functions=[VfioFunctionRecord(address=RTX, driver="nvidia")])
    share = SharingRecord(strategy="MPS", share_percent=50, memory_mib=1024)

    assert isinstance(kinds.of(_mig()), MigKind)
    assert isinstance(kinds.of(_device(sharing=share.model_dump(by_alias=True))), ShareKind)
    assert isinstance(kinds.of(_device(RTX, vfio=vfio.model_dump(by_alias=True))), VfioKind)
    assert isinstance(kinds.of(_device()), WholeCardKind)
    preparer = node(mocker, tmp_path / "m").container.preparer()
    with pytest.raises(UnknownKindError, match=r"gpu-x on card 0000:3b:00\.0 is of no known kind"):
        Kinds([MigKind(preparer)]).of(_device())
    with pytest.raises(ValueError, match=r"more than one kind without a record field"):
        Kinds([WholeCardKind(preparer), WholeCardKind(preparer)])
    with pytest.raises(ValueError, match=r"two kinds share a record field: \['mig', 'mig'\]"):
        Kinds([MigKind(preparer), MigKind(preparer)])


def test_a_checkpoint_written_before_the_kinds_reads_the_same_and_each_record_finds_its_kind(
    tmp_path: Path,
    mocker: MockerFixture,
) -> None:
    n = node(mocker, tmp_path)
    raw = json.loads(FIXTURE.read_text())

    data = n.container.store().file.parse(FIXTURE.read_bytes())

    assert data.model_dump(mode="json", by_alias=True) == raw["data"]  # nothing lost or renamed
    kinds: Kinds = n.container.kinds()
    found = {record.name: type(kinds.of(record.devices[0])) for record in data.claims.values()}
    assert found == {"train": MigKind, "infer": ShareKind, "slices": ShareKind, "vm": VfioKind}
    [mig] = data.claims["af4d8077-aa21-4f3c-8ec2-5d49606d3c05"].devices
    assert (made := mig_record(mig)) is not None
    assert (made.placement_start, made.gpu_instance, made.uuid) == (
        3,
        1,
        "MIG-260e56fc-be3d-5dd4-b6ba-3e9cd4a40bbf",
    )
    [vm] = data.claims["34ccba44-6a15-4b98-ae78-640b07b4dbd3"].devices
    assert (passed := vfio_of(vm)) is not None
    assert [(f.address, f.driver) for f in passed.functions] == [
        (RTX, "nvidia"),
        (RTX_AUDIO, "snd_hda_intel"),
    ]
    [infer] = data.claims["e565a05c-e10f-4cfd-aa78-63172cdf9fc8"].devices
    assert (share := share_of(infer)) is not None
    assert (share.strategy, share.share_percent, share.memory_mib) == (
        "MPS",
        30,
        4096,
    )


# -- MIG device -----------------------------------------------------------------------------------------


def test_the_mig_kind_switches_a_free_card_makes_the_device_and_releases_it(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    kind = MigKind(n.container.preparer())
    device = _mig(start=3)
    work = _work(device)

    edits = kind.prepare(device, work)

    assert _mig_mode(n)
    assert _instances(n) == [3]
    assert (made := mig_record(device)) is not None
    assert made.uuid is not None  # completed in the record
    assert edits.env == (("NVIDIA_VISIBLE_DEVICES", made.uuid),)
    assert (work.changed_cards, work.found_mig_modes) == ({A30}, {A30: False})
    assert kind.prepare(device, _work(device)) == edits  # again: the same device, nothing new

    kind.release(device, release := _work(device))
    assert _instances(n) == []
    assert release.changed_cards == {A30}
    kind.release(device, again := _work(device))  # idempotent
    assert again.changed_cards == set()
    assert _mig_mode(n)  # MIG mode stays for the next MIG claim


def test_the_mig_kind_does_not_switch_a_card_another_claim_uses(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    device = _mig()

    with pytest.raises(PrepareFailedError, match="must switch to MIG mode but is prepared for team/other"):
        MigKind(n.container.preparer()).prepare(device, _work(device, _other_claim(_device())))

    assert not _mig_mode(n)


# -- whole card -----------------------------------------------------------------------------------------


def test_the_whole_card_kind_leaves_empty_mig_mode_and_refuses_a_card_with_mig_devices(
    tmp_path: Path,
    mocker: MockerFixture,
) -> None:
    n = node(mocker, tmp_path)
    preparer = n.container.preparer()
    kind = WholeCardKind(preparer)
    preparer.set_mig_mode(A30, enabled=True)
    device = _device()

    edits = kind.prepare(device, work := _work(device))

    assert not _mig_mode(n)
    assert [node.path for node in edits.device_nodes][:2] == ["/dev/nvidia0", "/dev/nvidiactl"]
    assert (work.changed_cards, work.found_mig_modes) == ({A30}, {A30: True})
    kind.release(device, _work(device))
    assert not _mig_mode(n)  # a whole card stays as it is

    preparer.set_mig_mode(A30, enabled=True)
    preparer.create_mig_device(A30, profile_id=14, start=0, size=1)
    with pytest.raises(PrepareFailedError, match="has MIG devices") as refused:
        kind.prepare(device, _work(device))
    assert refused.value.reason == "CardInMigUse"


# -- shares ---------------------------------------------------------------------------------------------


def _card(n: Node, card: str = A30) -> tuple[int, int]:
    state = n.card_state(card)
    return state.compute_mode, state.time_slice


def test_the_share_kind_sets_the_time_slice_until_no_other_claims_share_needs_it(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    kind = ShareKind(
        preparer=n.container.preparer(), sharing=n.container.sharing(), watchdog=n.container.watchdog()
    )
    share = {"strategy": "TimeSlicing", "sharePercent": 50, "memoryMiB": 0, "interval": "Long"}
    device = _device(sharing=share)

    edits = kind.prepare(device, _work(device))

    assert _card(n) == (0, 3)
    assert edits.env[0][0] == "NVIDIA_VISIBLE_DEVICES"
    kind.release(device, _work(device, _other_claim(_device(sharing=share))))
    assert _card(n) == (0, 3)  # another claim's share still runs on the card
    kind.release(device, _work(device))
    assert _card(n) == (0, 0)


def test_the_share_kind_runs_the_cards_mps_daemon_with_the_shares_limits(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    kind = ShareKind(
        preparer=n.container.preparer(), sharing=n.container.sharing(), watchdog=n.container.watchdog()
    )
    device = _device(sharing={"strategy": "MPS", "sharePercent": 30, "memoryMiB": 4096})

    edits = kind.prepare(device, _work(device))

    env = dict(edits.env)
    assert (env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"]) == (
        "30",
        "0=4096M",
    )
    assert n.container.preparer().mps_running(n.container.sharing().folders(A30))
    kind.release(device, _work(device))
    assert not (n.mps_root / A30).exists()
    assert _card(n)[0] == 0
    kind.release(device, _work(device))  # idempotent


# -- VFIO passthrough -----------------------------------------------------------------------------------


def _vfio_device() -> DeviceRecord:
    functions = [{"address": RTX, "driver": "nvidia"}, {"address": RTX_AUDIO, "driver": "snd_hda_intel"}]
    return _device(RTX, device="gpu-rtx", vfio={"iommuGroup": "28", "functions": functions})


def _driver(n: Node, address: str) -> str | None:
    link = n.host.root / "bus" / "pci" / "devices" / address / "driver"
    return link.resolve().name if link.is_symlink() else None


def test_the_vfio_kind_binds_the_group_gives_the_vm_its_files_and_gives_everything_back(
    tmp_path: Path,
    mocker: MockerFixture,
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    [offer] = n.offers.publish(whole_offer(RTX))
    pod = n.pods.add("vm", {VFIO_ANNOTATION: "true"})
    ref = n.claims.allocate("vm", [offer], reserved_for=[pod])
    kind = n.container.kinds().of(_vfio_device())
    assert isinstance(kind, VfioKind)
    device = _vfio_device()
    device.device = offer.name
    work = _work(device, uid=ref.uid)
    work.resource = n.claims.get(ref.namespace, ref.name)

    edits = kind.prepare(device, work)

    assert (_driver(n, RTX), _driver(n, RTX_AUDIO)) == ("vfio-pci", "vfio-pci")
    assert [d.path for d in edits.device_nodes] == ["/dev/vfio/vfio", "/dev/vfio/28"]
    assert edits.env == ()  # not on the NVIDIA driver: no NVIDIA device
    assert all(Path(m.host_path).is_file() and "ro" in m.options for m in edits.mounts)
    assert len(edits.mounts) == 3  # the metadata twice (KEP-5304 and VEP 10 paths) and the hook input
    assert work.changed_cards == {RTX}

    kind.release(device, release := _work(device, uid=ref.uid))
    assert (_driver(n, RTX), _driver(n, RTX_AUDIO)) == ("nvidia", "snd_hda_intel")
    assert not any(Path(m.host_path).exists() for m in edits.mounts)
    assert release.changed_cards == {RTX}
    kind.release(device, again := _work(device, uid=ref.uid))  # idempotent
    assert again.changed_cards == set()
