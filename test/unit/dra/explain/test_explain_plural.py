"""One count wording for every explain sentence: ``1 whole card``, ``2 whole cards``, never
``1 devices`` or ``device(s)``."""

from __future__ import annotations

import pytest
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact, explained, physical_class

from pkg.dra.explain.device_words import plural, plural_form
from pkg.dra.explain.render import render


@pytest.mark.parametrize(
    ("word", "n", "said"),
    [
        ("whole card", 1, "1 whole card"),
        ("whole card", 3, "3 whole cards"),
        ("whole card", 0, "0 whole cards"),
        ("MIG 1g device", 2, "2 MIG 1g devices"),
        ("device of class gpu-whole", 1, "1 device of class gpu-whole"),
        ("device of class gpu-whole", 4, "4 devices of class gpu-whole"),
        ("more claim", 1, "1 more claim"),
    ],
)
def test_a_count_agrees_with_its_noun(word: str, n: int, said: str) -> None:
    assert plural(word, n) == said


def test_the_head_noun_of_a_phrase_takes_the_plural() -> None:
    assert plural_form("device of class x") == "devices of class x"
    assert plural_form("TimeSlicing share") == "TimeSlicing shares"


def test_the_report_counts_one_device_in_the_singular() -> None:
    trace = explained(
        claim("c", exact("gpu", "physical-exclusive", count=2)),  # one whole card on the node
        slices=a30_pool("node-a", card="gpu-0000-02-00-0"),
        classes=[physical_class()],
        allocated_claims=[],
    )
    report = render(trace)
    assert "  request gpu: 1 device of class physical-exclusive (1 fits)\n" in report
    assert "    7 other devices are not of class physical-exclusive (--all lists them)\n" in report
    assert "(s)" not in report
