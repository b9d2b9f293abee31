"""PhysicalGPU names: format, sanitising, allocation, stability, and matching objects to cards."""

from __future__ import annotations

import re

import pytest
from testutil.unit.nodeagent.nodeagent_fakes import LABEL_VALUE_PATTERN, gpu_object

from api.gpu.v1alpha1 import PciClass, PciId, PciInfo, PhysicalGPUStatus
from pkg.inventory.naming import (
    ADDRESS_LABEL,
    address_key,
    allocate_name,
    gpu_name,
    index_in_name,
    index_objects,
    node_part,
)

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def test_name_has_the_spec_shape() -> None:
    assert gpu_name("worker-1", 0, "10de", "20b7") == "worker-1-0-10de-20b7"
    assert gpu_name("worker-1", 12, "10DE", "20B7") == "worker-1-12-10de-20b7"


@pytest.mark.parametrize(
    ("node", "part"),
    [
        ("Worker_1", "worker-1"),
        ("gpu.node.example.com", "gpu.node.example.com"),
        ("-a..b-", "a.b"),
        ("a.-b-.c", "a.b.c"),
        ("___", "node"),
    ],
)
def test_node_part_is_sanitised(node: str, part: str) -> None:
    assert node_part(node) == part
    assert DNS_SUBDOMAIN.match(gpu_name(node, 3, "10de", "20b7"))


def test_long_node_names_are_shortened_with_a_hash_and_stay_distinct() -> None:
    first, second = "n" * 240 + "-a", "n" * 240 + "-b"
    names = {gpu_name(node, 1_000_000_000, "10de", "20b7") for node in (first, second)}
    assert len(names) == 2
    for name in names:
        assert len(name) <= 253
        assert DNS_SUBDOMAIN.match(name)
    assert index_in_name(first, gpu_name(first, 7, "10de", "20b7")) == 7


def test_address_key_is_a_label_value() -> None:
    assert address_key("0000:3B:00.0") == "0000-3b-00.0"
    assert LABEL_VALUE_PATTERN.match(address_key("0000:3b:00.0"))


def test_index_in_name_only_reads_this_nodes_pattern() -> None:
    assert index_in_name("n1", "n1-4-10de-20b7") == 4
    assert index_in_name("n1", "n1-x-10de-20b7") is None
    assert index_in_name("n1", "n10-4-10de-20b7") is None
    assert index_in_name("n1", "n1-4-10de-20b7-extra") is None


def test_a_new_card_takes_its_position_when_free() -> None:
    name = allocate_name(
        node_name="n1", position=1, vendor_id="10de", device_id="20b7", taken={"n1-0-10de-20b7"}
    )
    assert name == "n1-1-10de-20b7"


def test_a_taken_position_falls_back_to_the_lowest_free_index() -> None:
    # Cards at 0 and 2 remain after the card at 1 was removed; a new card sorting first (position 0)
    # must not reuse index 0 even for other IDs, so it takes 1.
    taken = {"n1-0-10de-20b7", "n1-2-10de-20b7"}
    name = allocate_name(node_name="n1", position=0, vendor_id="10de", device_id="27b8", taken=taken)
    assert name == "n1-1-10de-27b8"


def test_a_full_name_taken_by_a_foreign_object_is_skipped() -> None:
    taken = {"n1-0-10de-20b7", "n1-1-10de-20b7", "n1-2-10de-20b7", "unrelated"}
    assert allocate_name(node_name="n1", position=1, vendor_id="10de", device_id="20b7", taken=taken) == (
        "n1-3-10de-20b7"
    )


def test_removing_a_card_renames_no_other() -> None:
    # Three cards get their positions; the middle one goes; the others are matched by address.
    addresses = ["0000:17:00.0", "0000:3b:00.0", "0000:ca:00.0"]
    existing = [
        gpu_object(gpu_name("n1", i, "10de", "20b7"), address, age=i) for i, address in enumerate(addresses)
    ]
    remaining = [existing[0], existing[2]]
    index = index_objects(remaining)
    assert {key: str(gpu.metadata.name) for key, gpu in index.owner.items()} == {
        "0000-17-00.0": "n1-0-10de-20b7",
        "0000-ca-00.0": "n1-2-10de-20b7",
    }
    # A card plugged back into the freed slot gets the freed index again.
    assert allocate_name(
        node_name="n1", position=1, vendor_id="10de", device_id="20b7", taken=index.names
    ) == ("n1-1-10de-20b7")


def _status(address: str) -> PhysicalGPUStatus:
    return PhysicalGPUStatus(
        pci_info=PciInfo(
            address=address, class_=PciClass(code="0302"), vendor=PciId(id="10de"), device=PciId(id="20b7")
        )
    )


def test_objects_are_sorted_out_by_address() -> None:
    kept = gpu_object("n1-0-10de-20b7", "0000:3b:00.0", age=0)
    younger_twin = gpu_object("n1-5-10de-20b7", "0000:3b:00.0", age=10)
    by_status = gpu_object(
        "n1-1-10de-20b7", None, status=_status("0000:d8:00.0"), labels={"gpu.deckhouse.io/node": "n1"}
    )
    nameless = gpu_object("n1-2-10de-20b7", None, labels={"gpu.deckhouse.io/node": "n1"})
    going = gpu_object("n1-3-10de-20b7", "0000:17:00.0", deleting=True)
    index = index_objects([younger_twin, by_status, nameless, going, kept])
    assert index.owner == {"0000-3b-00.0": kept, "0000-d8-00.0": by_status}
    assert index.duplicates == [younger_twin]
    assert index.unidentified == [nameless]
    assert index.terminating == {"0000-17-00.0": going}
    assert "n1-3-10de-20b7" in index.names  # a terminating object still holds its name
    assert ADDRESS_LABEL == "gpu.deckhouse.io/pci-address"


def test_a_recreated_object_gets_its_previous_name_back() -> None:
    taken = {"n1-0-10de-20b7"}
    kwargs = {"node_name": "n1", "position": 1, "vendor_id": "10de", "device_id": "20b7", "taken": taken}
    assert allocate_name(**kwargs, previous="n1-5-10de-20b7") == "n1-5-10de-20b7"  # type: ignore[arg-type]
    assert allocate_name(**kwargs, previous="n1-0-10de-20b7") == "n1-1-10de-20b7"  # type: ignore[arg-type]
    assert allocate_name(**kwargs, previous="n1-5-10de-27b8") == "n1-1-10de-20b7"  # type: ignore[arg-type]
    assert allocate_name(**kwargs, previous="other-5-10de-20b7") == "n1-1-10de-20b7"  # type: ignore[arg-type]
