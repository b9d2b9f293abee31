"""The share sizing rule gpu-handler prepares a share by and ``kubectl gpu who`` shows it by.

Each case is one branch of the rule: where the percentage comes from (consumed, the config's
default, the whole card), where the memory comes from (consumed, or for MPS the percentage of the
card), and that TimeSlicing records the memory it consumed but limits none.
"""

from __future__ import annotations

import pytest

from pkg.dra.model.share_size import MIB, ShareSize, ShareSizeError, share_size

GIB = 2**30
CARD = 40 * GIB


def card_memory() -> int:
    return CARD


def never() -> int:
    raise AssertionError("the card's memory is read only for an MPS share that consumed none")


@pytest.mark.parametrize(
    ("strategy", "percent", "memory", "default", "size"),
    [
        # the consumed percentage wins over the config's default
        ("MPS", 25, 8 * GIB, 30, ShareSize(25, 8 * 1024, limited=True)),
        # MPS without consumed memory: its percentage of the card
        ("MPS", 25, None, None, ShareSize(25, 10 * 1024, limited=True)),
        ("MPS", 25, 0, None, ShareSize(25, 10 * 1024, limited=True)),
        # no consumable capacity: the config's default, else the whole card
        ("MPS", None, None, 30, ShareSize(30, 12 * 1024, limited=True)),
        ("MPS", None, None, None, ShareSize(100, 40 * 1024, limited=True)),
        ("MPS", None, None, 0, ShareSize(100, 40 * 1024, limited=True)),
        # TimeSlicing: the memory it consumed, recorded, never a limit; the card is not read
        ("TimeSlicing", 50, 4 * GIB, None, ShareSize(50, 4 * 1024, limited=False)),
        ("TimeSlicing", 50, None, None, ShareSize(50, 0, limited=False)),
        ("TimeSlicing", None, None, 30, ShareSize(30, 0, limited=False)),
    ],
)
def test_a_share_is_sized_from_its_allocation(
    strategy: str, percent: int | None, memory: int | None, default: int | None, size: ShareSize
) -> None:
    reads = card_memory if strategy == "MPS" and not memory else never
    got = share_size(
        strategy, consumed_percent=percent, consumed_memory=memory, default_percent=default, card_memory=reads
    )
    assert got == size


def test_memory_is_whole_mib_and_only_mps_limits_it() -> None:
    odd = share_size(
        "MPS", consumed_percent=33, consumed_memory=None, default_percent=None, card_memory=card_memory
    )
    assert odd.memory_mib == CARD * 33 // 100 // MIB  # rounded down to the MiB the daemon is given
    assert odd.memory_limit_mib == odd.memory_mib
    assert odd.memory_limit_bytes == odd.memory_mib * MIB
    sliced = share_size(
        "TimeSlicing", consumed_percent=50, consumed_memory=4 * GIB, default_percent=None, card_memory=never
    )
    assert (sliced.memory_limit_mib, sliced.memory_limit_bytes) == (None, None)


@pytest.mark.parametrize("percent", [0, 101, 150])
def test_a_percentage_outside_1_to_100_is_refused(percent: int) -> None:
    with pytest.raises(ShareSizeError, match=f"consumed sharePercent {percent}, not between 1 and 100"):
        share_size(
            "TimeSlicing",
            consumed_percent=percent,
            consumed_memory=None,
            default_percent=None,
            card_memory=never,
        )


def test_the_caller_says_why_the_card_cannot_be_read() -> None:
    def unpublished() -> int:
        raise ShareSizeError("no memory capacity")

    with pytest.raises(ShareSizeError, match="no memory capacity"):
        share_size(
            "MPS", consumed_percent=10, consumed_memory=None, default_percent=None, card_memory=unpublished
        )
