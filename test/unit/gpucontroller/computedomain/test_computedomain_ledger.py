"""The channel ledger: lowest free channel >= 1, own entry kept, dead domains' entries freed."""

from __future__ import annotations

from pkg.gpucontroller.computedomain.internal.ledger import (
    Holder,
    encode_ledger,
    parse_ledger,
    release_channel,
    take_channel,
)


def test_the_lowest_free_channel_from_one_is_taken() -> None:
    entries = {1: Holder("a", "t/a"), 3: Holder("c", "t/c")}
    channel, updated = take_channel(entries, uid="new", domain="t/new", live={"a", "c", "new"}, in_use=set())
    assert channel == 2
    assert updated[2] == Holder("new", "t/new")


def test_channels_in_statuses_and_own_entries_count() -> None:
    channel, _ = take_channel({}, uid="new", domain="t/new", live={"new"}, in_use={1, 2})
    assert channel == 3
    channel, updated = take_channel(
        {5: Holder("new", "t/new")}, uid="new", domain="t/new", live=set(), in_use=set()
    )
    assert channel == 5
    assert updated == {5: Holder("new", "t/new")}


def test_an_entry_of_a_domain_that_no_longer_exists_is_free() -> None:
    channel, updated = take_channel(
        {1: Holder("gone", "t/gone")}, uid="new", domain="t/new", live={"new"}, in_use=set()
    )
    assert channel == 1
    assert updated == {1: Holder("new", "t/new")}


def test_every_channel_taken_gives_none() -> None:
    entries = {n: Holder(f"d{n}", "t/d") for n in range(1, 2048)}
    live = {h.uid for h in entries.values()} | {"new"}
    assert take_channel(entries, uid="new", domain="t/new", live=live, in_use=set())[0] is None


def test_the_ledger_round_trips_and_drops_malformed_entries() -> None:
    entries = {2: Holder("u2", "t/b"), 1: Holder("u1", "t/a")}
    assert parse_ledger(encode_ledger(entries)) == entries
    assert parse_ledger({"0": "u t/x", "x": "u t/y", "2048": "u t/z", "4": ""}) == {}
    assert release_channel(entries, "u1") == {2: Holder("u2", "t/b")}
