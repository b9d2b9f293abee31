"""Allocator.warm_classes: the selector passes of every class made ahead of the first request, so
an explanation of a class never seen before judges the cluster from memos, with the verdicts a
cold allocator gives."""

from __future__ import annotations

from kubernetes.client import V1ResourceSlice
from testutil.unit.dra.allocator.alloc_builders import (
    a30_pool,
    claim,
    device_class,
    exact,
    explained,
    mig_class,
    physical_class,
)

from pkg.dra.allocator import Allocator


def cluster(nodes: int, generation: int = 1) -> list[V1ResourceSlice]:
    return [rs for n in range(nodes) for rs in a30_pool(f"node-{n}", generation=generation)]


def verdicts(allocator: Allocator, slices: list[V1ResourceSlice], class_name: str) -> list[tuple[str, str]]:
    classes = [mig_class("1g"), mig_class("2g"), physical_class()]
    trace = explained(
        claim("asked", exact("gpu", class_name)),
        slices=slices,
        classes=classes,
        allocated_claims=[],
        allocator=allocator,
    )
    return [(v.device, v.reason) for r in trace.requests for v in r.devices]


def test_after_warming_an_explanation_evaluates_no_selector_and_says_what_a_cold_one_says(
    cel_evaluations: list[str],
) -> None:
    evaluations = cel_evaluations
    slices = cluster(6)
    classes = {"mig-1g": mig_class("1g"), "mig-2g": mig_class("2g"), "physical-exclusive": physical_class()}
    warm = Allocator()
    assert warm.warm_classes(slices, classes) == 3 * 6  # one pass per class and pool
    assert evaluations, "warming evaluates the selectors"
    evaluations.clear()
    answers = {name: verdicts(warm, slices, name) for name in classes}
    assert evaluations == []  # the first explanation of each class judged every device from memos
    for name, answer in answers.items():
        assert answer == verdicts(Allocator(), slices, name)
    assert evaluations, "a cold allocator evaluates them"


def test_a_second_round_makes_passes_only_for_what_changed() -> None:
    slices = cluster(4)
    classes = {"mig-1g": mig_class("1g"), "physical-exclusive": physical_class()}
    allocator = Allocator()
    assert allocator.warm_classes(slices, classes) == 8
    assert allocator.warm_classes(slices, classes) == 0  # nothing changed: nothing to do
    republished = slices[:-2] + a30_pool("node-3", generation=2)  # one driver republished its pool
    assert allocator.warm_classes(republished, classes) == 2  # that pool, for both classes
    classes["mig-2g"] = mig_class("2g")  # a class created later
    assert allocator.warm_classes(republished, classes) == 4


def test_a_class_whose_selector_fails_is_warmed_with_its_errors() -> None:
    slices = cluster(2)
    broken = device_class("broken", "device.driver ==")  # does not compile
    classes = {"broken": broken, "mig-1g": mig_class("1g")}
    warm = Allocator()
    assert warm.warm_classes(slices, classes) == 4
    request = claim("asked", exact("gpu", "broken"))
    cold_trace = explained(request, slices=slices, classes=[broken], allocated_claims=[])
    warm_trace = explained(request, slices=slices, classes=[broken], allocated_claims=[], allocator=warm)
    assert warm_trace.outcome == cold_trace.outcome  # the same compile error
    assert [(v.device, v.reason, v.detail) for r in warm_trace.requests for v in r.devices] == [
        (v.device, v.reason, v.detail) for r in cold_trace.requests for v in r.devices
    ]


def test_a_class_with_a_selector_that_is_not_cel_is_skipped() -> None:
    not_cel = device_class("not-cel", "true")
    assert not_cel.spec is not None
    assert not_cel.spec.selectors
    not_cel.spec.selectors[0].cel = None  # a selector kind this allocator does not know
    classes = {"not-cel": not_cel, "mig-1g": mig_class("1g")}
    assert Allocator().warm_classes(cluster(2), classes) == 2


def test_an_incomplete_pool_is_not_warmed() -> None:
    complete = a30_pool("node-0")
    incomplete = a30_pool("node-1")[1:]  # the counter slice of a two-slice pool is missing
    assert Allocator().warm_classes(complete + incomplete, {"mig-1g": mig_class("1g")}) == 1


def test_stop_ends_the_round_between_passes() -> None:
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3

    allocator = Allocator()
    slices = cluster(5)
    classes = {"mig-1g": mig_class("1g")}
    assert allocator.warm_classes(slices, classes, stop=stop) == 3
    assert allocator.warm_classes(slices, classes) == 2  # the rest, next round
