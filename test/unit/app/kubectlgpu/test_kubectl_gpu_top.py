"""``kubectl gpu top`` from claims alone: one row per container of each sample, rows for devices
without a sample, malformed samples reported per claim without spoiling the others."""

from __future__ import annotations

from datetime import UTC, datetime

from testutil.unit.app.kubectlgpu.kubectl_gpu_objects import claim, container, device_status, usage

from pkg.app.kubectlgpu.table import Row
from pkg.app.kubectlgpu.top import MALFORMED, NO_SAMPLE, top_view

NOW = datetime(2026, 11, 26, 12, 0, 45, tzinfo=UTC)
POOL = "gpus/w1"
GiB = 1024**3


def cells(view_rows: list[Row], *headers: str) -> list[tuple[str, ...]]:
    return [tuple(r.cells[h] for h in headers) for r in view_rows]


def test_one_row_per_container_largest_memory_first() -> None:
    small = claim(
        "ml",
        "small",
        devices=[(POOL, "gpu-a-ts", "s1")],
        pods=("infer",),
        status_devices=[
            device_status(
                POOL, "gpu-a-ts", usage(containers=[container("ml", "infer", "srv", GiB, 12)]), "s1"
            )
        ],
    )
    big = claim(
        "ml",
        "big",
        devices=[(POOL, "gpu-b", None)],
        pods=("train",),
        status_devices=[
            device_status(
                POOL,
                "gpu-b",
                usage(
                    containers=[
                        container("ml", "train", "trainer", 30 * GiB, 97),
                        container("ml", "train", "sidecar", 3 * GiB // 2),
                    ]
                ),
            )
        ],
    )
    view = top_view([small, big], now=NOW)
    assert cells(view.rows, "POD", "CONTAINER", "CLAIM", "GPU-MEMORY", "SM%", "AGE-OF-SAMPLE") == [
        ("train", "trainer", "big", "30Gi", "97", "45s"),
        ("train", "sidecar", "big", "1.5Gi", "-", "45s"),
        ("infer", "srv", "small", "1Gi", "12", "45s"),
    ]
    assert view.problems == []
    assert view.rows[2].cells["DEVICE"] == "gpu-a-ts#s1"
    assert view.rows[0].item["memoryBytes"] == 30 * GiB
    assert view.rows[0].item["sampledAt"] == "2026-11-26T12:00:00Z"


def test_sort_by_sm_puts_devices_without_utilization_last() -> None:
    c = claim(
        "ml",
        "c",
        devices=[(POOL, "gpu-b", None)],
        status_devices=[
            device_status(
                POOL,
                "gpu-b",
                usage(containers=[container("ml", "p", "a", 5, None), container("ml", "p", "b", 1, 40)]),
            )
        ],
    )
    assert [r.cells["CONTAINER"] for r in top_view([c], now=NOW, sort_by="sm").rows] == ["b", "a"]


def test_allocated_device_without_a_sample_shows_as_such_after_the_sampled_ones() -> None:
    waiting = claim("ml", "waiting", devices=[(POOL, "gpu-c", None)], pods=("p1",))
    sampled = claim(
        "ml",
        "sampled",
        devices=[(POOL, "gpu-b", None)],
        status_devices=[device_status(POOL, "gpu-b", usage(containers=[container("ml", "p2", "c", 7)]))],
    )
    view = top_view([waiting, sampled], now=NOW)
    assert cells(view.rows, "CLAIM", "POD", "GPU-MEMORY") == [
        ("sampled", "p2", "7"),
        ("waiting", "p1", NO_SAMPLE),
    ]


def test_malformed_sample_is_reported_for_its_claim_and_the_others_still_print() -> None:
    bad = claim(
        "ml",
        "bad",
        devices=[(POOL, "gpu-a", None), (POOL, "gpu-x", None)],
        status_devices=[
            device_status(POOL, "gpu-a", {"kind": "DeviceUsage", "memoryUsedBytes": "lots"}),
            device_status(POOL, "gpu-x", ["not", "an", "object"]),
        ],
    )
    good = claim(
        "ml",
        "good",
        devices=[(POOL, "gpu-b", None)],
        status_devices=[device_status(POOL, "gpu-b", usage(containers=[container("ml", "p", "c", 9)]))],
    )
    view = top_view([bad, good], now=NOW)
    assert cells(view.rows, "CLAIM", "GPU-MEMORY") == [("good", "9"), ("bad", MALFORMED), ("bad", MALFORMED)]
    assert len(view.problems) == 2
    assert all(p.startswith("claim ml/bad device gpu-") for p in view.problems)
    assert any("malformed DeviceUsage" in p for p in view.problems)
    assert any("data is a list" in p for p in view.problems)


def test_other_drivers_entries_are_ignored_and_omitted_containers_are_counted() -> None:
    c = claim(
        "ml",
        "c",
        devices=[(POOL, "gpu-b", None)],
        status_devices=[
            {"driver": "other.example.com", "pool": "x", "device": "y", "data": "garbage"},
            device_status(
                POOL,
                "gpu-b",
                usage(containers=[container("ml", "p", "c", 2 * GiB)], omitted=3, memory=5 * GiB),
            ),
        ],
    )
    view = top_view([c], now=NOW)
    assert view.problems == []
    assert cells(view.rows, "CONTAINER", "GPU-MEMORY") == [("<3 more>", "3Gi"), ("c", "2Gi")]


def test_sample_of_an_idle_device_still_gives_a_row() -> None:
    c = claim(
        "ml",
        "idle",
        devices=[(POOL, "gpu-b", None)],
        pods=("p",),
        status_devices=[device_status(POOL, "gpu-b", usage(containers=[], sampled_at="2026-11-26T11:00:45"))],
    )
    (row,) = top_view([c], now=NOW).rows
    assert (row.cells["POD"], row.cells["CONTAINER"], row.cells["AGE-OF-SAMPLE"]) == ("p", "<idle>", "60m")
