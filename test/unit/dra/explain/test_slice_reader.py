"""explain's ResourceSlice reader: the client's models, decoded part by part, page by page."""

from __future__ import annotations

import copy
import json
import tracemalloc
from typing import Any

import pytest
from kubernetes.client import V1DeviceTaint
from pytest_mock import MockerFixture
from testutil.unit.dra.allocator.alloc_builders import Cluster, a30_pool, device, mig_class, resource_slice

from pkg.dra.explain import slice_reader
from pkg.dra.explain.slice_reader import SliceDecoder, SliceReadError, read_slices
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE


def as_json(slices: list[Any]) -> list[dict[str, Any]]:
    return [RESOURCE_SLICE.encode(s) for s in slices]


def tainted_slice() -> Any:
    gpu = device(
        "tainted", attributes={"deviceType": "MIG", "nvidia.com/ccMajor": 8}, capacity={"memory": "1Gi"}
    )
    gpu.taints = [V1DeviceTaint(key="k", value="v", effect="NoSchedule")]
    gpu.allow_multiple_allocations = True
    return resource_slice(
        "tainted", pool="t", devices=[gpu, device("plain", attributes={"deviceType": "MIG"})]
    )


def test_decodes_what_the_clients_models_decode() -> None:
    """Field for field the model the client would have decoded: taints, shared flags, counters,
    capacities and attributes of every kind."""
    raw = as_json([*a30_pool(), *a30_pool("node-b", card="gpu-0000-03-00-0"), tainted_slice()])
    expected = [RESOURCE_SLICE.decode(r) for r in copy.deepcopy(raw)]
    decoded = [SliceDecoder().decode(r) for r in copy.deepcopy(raw)]
    assert decoded == expected
    assert as_json(decoded) == as_json(expected)


def test_equal_parts_are_shared() -> None:
    """Devices of one kind on two nodes share their attribute values (what keeps memory small)."""
    decoder = SliceDecoder()
    a, b = (decoder.decode(r) for r in as_json([*a30_pool("node-a"), *a30_pool("node-b")])[1::2])
    first, second = (a.spec.devices or [])[0], (b.spec.devices or [])[0]
    assert first.name == second.name
    assert (first.attributes or {})["migProfile"] is (second.attributes or {})["migProfile"]
    assert first is not second


def test_values_equal_in_python_but_not_in_json_stay_apart() -> None:
    """1 and true are equal in Python; as attribute values they are different things (and
    ``{"int": true}`` is invalid): a cached value is never reused for the other."""
    raw = as_json([resource_slice("s", pool="p", devices=[device("a", attributes={"n": 1})])])[0]
    decoder = SliceDecoder()
    decoder.decode(copy.deepcopy(raw))
    raw["spec"]["devices"][0]["attributes"]["n"] = {"int": True}
    with pytest.raises(SliceReadError, match=r"ResourceSlice s: device a: attributes: n is invalid: int"):
        decoder.decode(raw)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.update(spec=[]), r"ResourceSlice s is invalid: spec: Input should be"),
        (lambda r: r["spec"].update(devices={}), r"ResourceSlice s: spec.devices is a dict, not a list"),
        (lambda r: r["spec"]["devices"].append(7), r"ResourceSlice s: spec.devices\[1\]: expected an object"),
        (
            lambda r: r["spec"]["devices"][0].pop("name"),
            r"ResourceSlice s: spec.devices\[0\]: name is missing",
        ),
        (lambda r: r["spec"]["devices"][0].update(name=5), r"spec.devices\[0\]: name is not a string"),
        (
            lambda r: r["spec"]["devices"][0].update(surprise=1),
            r"ResourceSlice s: device a is invalid: surprise: Extra inputs are not permitted",
        ),
        (
            lambda r: r["spec"]["devices"][0]["capacity"].update(memory={"value": 5}),
            r"ResourceSlice s: device a: capacity: memory is invalid: value: Input should be a valid string",
        ),
        (
            lambda r: r["spec"]["devices"][0].update(consumesCounters={}),
            r"ResourceSlice s: device a: consumesCounters is not a list",
        ),
        (
            lambda r: r["spec"]["devices"][0].update(attributes=[]),
            r"ResourceSlice s: device a: attributes: expected an object, got list",
        ),
        (lambda r: r["metadata"].update(name=7), r"ResourceSlice <unnamed> is invalid: metadata.name"),
    ],
)
def test_malformed_slices_are_named(mutate: Any, message: str) -> None:
    raw = as_json([resource_slice("s", pool="p", devices=[device("a", capacity={"memory": "1Gi"})])])[0]
    mutate(raw)
    with pytest.raises(SliceReadError, match=message):
        SliceDecoder().decode(raw)


def test_an_enormous_name_is_cut_in_the_message() -> None:
    raw = as_json([resource_slice("s", pool="p", devices=[device("a")])])[0]
    raw["metadata"]["name"] = "x" * 100_000
    raw["spec"]["devices"][0]["bogus"] = 1
    with pytest.raises(SliceReadError) as caught:
        SliceDecoder().decode(raw)
    assert len(str(caught.value)) < 400
    assert "(100000 characters)" in str(caught.value)


def pages(raw: list[dict[str, Any]], size: int) -> list[bytes]:
    chunks = [raw[i : i + size] for i in range(0, len(raw), size)]
    return [
        json.dumps(
            {"items": chunk, "metadata": {"continue": str(n + 1) if n + 1 < len(chunks) else ""}}
        ).encode()
        for n, chunk in enumerate(chunks)
    ]


def test_reads_every_page_of_one_list(mocker: MockerFixture) -> None:
    raw = as_json([*a30_pool("node-a"), *a30_pool("node-b"), tainted_slice()])
    kube = mocker.MagicMock()
    kube.list_page_json.side_effect = pages(raw, 2)
    slices = read_slices(kube, page_size=2)
    assert as_json(slices) == raw
    tokens = [c.kwargs["continue_token"] for c in kube.list_page_json.call_args_list]
    assert tokens == [None, "1", "2"]  # the server's continue token, page after page
    assert {c.kwargs["limit"] for c in kube.list_page_json.call_args_list} == {2}


def test_a_failed_page_request_raises_in_order(mocker: MockerFixture) -> None:
    """The next page is fetched ahead on a helper thread; its failure still surfaces here, after
    the items of the pages before it."""
    raw = as_json([*a30_pool("node-a"), *a30_pool("node-b")])
    kube = mocker.MagicMock()
    kube.list_page_json.side_effect = [pages(raw, 2)[0], OSError("connection reset")]
    with pytest.raises(OSError, match="connection reset"):
        read_slices(kube, page_size=2)
    assert kube.list_page_json.call_count == 2


def test_a_page_that_is_not_a_list_is_an_error(mocker: MockerFixture) -> None:
    kube = mocker.MagicMock()
    kube.list_page_json.return_value = b"[1, 2]"
    with pytest.raises(SliceReadError, match="ResourceSliceList: expected an object"):
        read_slices(kube)


def big_cluster(nodes: int) -> list[dict[str, Any]]:
    """``nodes`` nodes of one A30 each, every device on each node alike but for the node."""
    return as_json([rs for n in range(nodes) for rs in a30_pool(f"node-{n:04d}")])


def test_validation_work_grows_with_distinct_parts_not_with_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounded time, counted rather than timed: the client's models validate one shell per slice and
    each distinct device part once, so 300 nodes cost the same model work per node as 3 after the
    first (what remains per device is a dict lookup and assembling the model)."""
    calls: list[type[Any]] = []
    original = slice_reader._validate

    def counting(model: type[Any], raw: object, where: str) -> Any:
        calls.append(model)
        return original(model, raw, where)

    monkeypatch.setattr(slice_reader, "_validate", counting)
    for nodes in (3, 300):
        calls.clear()
        decoder = SliceDecoder()
        raw = big_cluster(nodes)
        decoded = [decoder.decode(r) for r in raw]
        devices = sum(len(rs.spec.devices or ()) for rs in decoded)
        parts = len(calls) - len(raw)  # one shell per slice, the rest are device parts
        if nodes == 3:
            first, few = parts, devices
        else:
            assert devices == 100 * few
            assert parts == first  # every node's devices alike: no new part after the first node


def test_memory_per_device_far_below_the_clients_models() -> None:
    """Shared parts: a device costs a fraction of what the client's full decode costs (traced
    allocations of both, side by side on the same slices)."""
    raw = big_cluster(100)

    def peak(decode: Any) -> int:
        items = copy.deepcopy(raw)
        tracemalloc.start()
        kept = decode(items)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(kept) == len(raw)
        return top

    decoder = SliceDecoder()
    ours = peak(lambda items: [decoder.decode(r) for r in items])
    theirs = peak(lambda items: [RESOURCE_SLICE.decode(r) for r in items])
    assert ours < theirs / 3


def test_shared_table_is_bounded() -> None:
    decoder = SliceDecoder(max_shared=10)
    for r in big_cluster(20):
        decoder.decode(r)
        assert len(decoder._shared) <= 10 + 50  # cleared between slices once past the bound


def test_a_device_class_selector_on_read_slices_decides_as_on_decoded_ones() -> None:
    """The allocator cannot tell the two apart: same decision, same explanation."""
    raw = as_json([*a30_pool("node-a"), *a30_pool("node-b")])
    ours = Cluster([SliceDecoder().decode(r) for r in copy.deepcopy(raw)], [mig_class("1g")])
    theirs = Cluster([RESOURCE_SLICE.decode(r) for r in raw], [mig_class("1g")])
    assert [ours.take("mig-1g") for _ in range(4)] == [theirs.take("mig-1g") for _ in range(4)]
