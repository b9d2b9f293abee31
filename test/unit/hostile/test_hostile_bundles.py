"""Family 4: explain bundles — any bytes give an explanation or a clear error, in bounded time.

Generated inputs: arbitrary bytes, alias bombs of any depth and fan-out, nesting of any depth,
claims with any count and allocation mode, slices repeated under one name, ``All`` requests over
any number of devices. Each runs ``gpu-dra-controller explain`` in a bounded child
(:mod:`bounded`); the exit code is 0, 1 or 2 with an error naming the file, the place or the
object — never 3 (an internal failure) or a traceback — and the answer is the one the API server
and the scheduler would give.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from testutil.unit.hostile.bounded import run_bounded

from pkg.dra.explain import bundle_yaml
from pkg.dra.explain.bundle_yaml import MAX_DEPTH
from pkg.dra.explain.cli import run

CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.deckhouse.io"'}}]},
}


def device_slice(name: str, devices: int, *, prefix: str = "d") -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.deckhouse.io",
            "nodeName": "node-a",
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"{prefix}{i}"} for i in range(devices)],
        },
    }


def claim(request: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", **request}}]}},
    }


def _explain(data: bytes) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bundle.yaml"
        path.write_bytes(data)
        return _explain_file(path)


def _explain_file(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["ns/c", "--bundle", str(path)], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def explain(data: bytes | str) -> tuple[int, str, str]:
    return run_bounded(_explain, data.encode() if isinstance(data, str) else data)


def verdict(out: str) -> str:
    """explain's ``result:`` line (what each allocated device consumes follows it)."""
    return next(line for line in out.splitlines() if line.startswith("result: "))


def documents(*objects: object) -> str:
    return yaml.safe_dump_all(objects)


@given(st.binary(max_size=2000))
def test_any_bytes_get_an_explanation_or_a_clear_error(data: bytes) -> None:
    code, _, err = explain(data)
    assert code in (0, 1, 2), err
    if code == 2:
        assert err.startswith("error: ")
        assert "Traceback" not in err


@given(st.integers(1, 12), st.integers(2, 12))
def test_alias_bombs_fail_early_with_go_yamls_rule(levels: int, fanout: int) -> None:
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]" for i in range(1, levels + 1)]
    code, _, err = explain("\n".join(lines) + "\n")
    assert code == 2
    expanded = sum(fanout**i for i in range(levels + 1))
    if expanded > 100_000:
        assert "excessive aliasing" in err


@given(st.integers(1, 3 * MAX_DEPTH), st.sampled_from(["[", "{a: ", "- "]))
def test_nesting_of_any_depth_is_read_or_refused_by_depth(depth: int, opener: str) -> None:
    closer = {"[": "]", "{a: ": "}", "- ": ""}[opener]
    text = "x: " + opener * depth + "1" + closer * depth if opener != "- " else (opener * depth + "1")
    code, _, err = explain(text + "\n")
    assert code == 2  # never an object of ours, but always a clear answer
    if depth > MAX_DEPTH + 1:
        assert "nested deeper than" in err


@given(st.binary(min_size=1, max_size=50).filter(lambda b: not _is_utf8(b)))
def test_a_file_that_is_not_utf8_is_named_with_the_byte(junk: bytes) -> None:
    code, _, err = explain(documents(CLASS).encode() + b"# " + junk + b"\n")
    assert code == 2
    assert "not UTF-8: byte" in err


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(max_examples=20)  # each runs a whole explanation
@given(
    st.one_of(st.none(), st.integers(-3, 40)),
    st.sampled_from([None, "ExactCount", "All", "Some"]),
)
# The derandomized draws above happen to hold no negative count; these always run.
@example(count=-1, mode=None)
@example(count=-1, mode="ExactCount")
@example(count=-(2**63), mode=None)  # int64's minimum: the API's type, no overflow on the way
@example(count=-(10**30), mode="ExactCount")  # beyond int64: still the API's wording, not a crash
def test_claims_get_the_api_servers_answer(count: int | None, mode: str | None) -> None:
    request: dict[str, object] = {}
    if count is not None:
        request["count"] = count
    if mode is not None:
        request["allocationMode"] = mode
    code, out, err = explain(documents(CLASS, device_slice("s", 40), claim(request)))
    field = "spec.devices.requests[0].exactly"
    if mode == "Some":
        assert code == 2
        assert f'{field}.allocationMode: Unsupported value: "Some"' in err
    elif mode == "All" and count:
        assert code == 2
        assert (
            f"{field}.count: Invalid value: {count}: must not be specified when allocationMode is 'All'"
            in err
        )
    elif mode == "All":
        # all 40 devices match, more than a claim may hold: the scheduler's own error
        assert code == 1
        assert "number of requested devices 40 exceeds the claim limit of 32" in out
    elif count is not None and count < 0:
        assert code == 2
        assert f"{field}.count: Invalid value: {count}: must be greater than zero" in err
    else:  # the API defaults an unset or zero count to one device
        wanted = max(count or 1, 1)
        if wanted > 32:
            assert code == 1
            assert "exceeds the claim limit of 32" in out
        else:
            assert code == 0, out + err
            assert verdict(out).count("gpu.deckhouse.io/s/d") == wanted


@settings(max_examples=12)
@given(st.integers(1, 64))
def test_all_over_more_devices_than_a_claim_holds_names_the_limit(devices: int) -> None:
    code, out, _ = explain(documents(CLASS, device_slice("s", devices), claim({"allocationMode": "All"})))
    if devices > 32:
        assert code == 1
        assert f"number of requested devices {devices} exceeds the claim limit of 32" in out
    else:
        assert code == 0
        assert verdict(out).count("gpu.deckhouse.io/s/d") == devices


@given(st.integers(0, 5), st.integers(1, 5))
def test_two_slices_of_one_name_are_an_error_naming_both(before: int, between: int) -> None:
    others = [device_slice(f"o{i}", 1) for i in range(before)]
    middle = [device_slice(f"m{i}", 1) for i in range(between - 1)]
    twice = device_slice("twin", 1)
    text = documents(CLASS, *others, twice, *middle, device_slice("twin", 2, prefix="e"), claim({}))
    code, _, err = explain(text)
    first, second = 2 + before, 2 + before + between
    assert code == 2
    assert f"document {second}: V1ResourceSlice twin appears twice (first in " in err
    assert f"document {first})" in err


def test_a_claim_without_spec_asks_for_nothing_as_in_kubernetes() -> None:
    no_spec: dict[str, object] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"}
    no_spec["metadata"] = {"name": "c", "namespace": "ns"}
    code, out, _ = explain(documents(CLASS, device_slice("s", 1), no_spec))
    assert code == 0
    assert verdict(out).startswith("result: allocatable")


def test_a_fifo_as_bundle_is_an_answer_not_a_hang(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "bundle.yaml"
    os.mkfifo(fifo)

    def explain_fifo() -> tuple[int, str]:
        err = io.StringIO()
        return run(["ns/c", "--bundle", str(fifo)], out=io.StringIO(), err=err), err.getvalue()

    code, err = run_bounded(explain_fifo)
    assert code == 2
    assert "error:" in err


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ('device.attributes["gpu.deckhouse.io"].missing == 1', 'Key not found in map : "missing"'),
        (
            "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10]"
            ".all(c, [1,2,3,4,5,6,7,8,9,10].all(d, true))))",
            "evaluation exceeded the budget of 10000 comprehension iterations",
        ),
        ('quantity("12Q").isInteger()', "quantities must match the regular expression"),
    ],
    ids=["missing-key", "iteration-budget", "bad-quantity"],
)
def test_explain_names_a_class_selector_that_fails_at_run_time_on_every_device(
    expression: str, reason: str
) -> None:
    """A selector the API server admits may still fail on a device: the person running explain must
    see which class and which selector broke on which device, as the scheduler reports it."""
    selectors = [
        {"cel": {"expression": 'device.driver == "gpu.deckhouse.io"'}},
        {"cel": {"expression": expression}},
    ]
    broken = {**CLASS, "spec": {"selectors": selectors}}
    code, out, err = explain(documents(broken, device_slice("s", 2), claim({})))
    assert code == 1, out + err
    failures = [
        line.split(maxsplit=2)[2] for line in out.splitlines() if line.strip().startswith("selector error ")
    ]
    assert len(failures) == 2, out
    for device, failure in zip(("gpu.deckhouse.io/s/d0", "gpu.deckhouse.io/s/d1"), failures, strict=True):
        assert failure.startswith(f"{device}: class gpu: selector #1 on device {device}: CEL runtime error: ")
        assert reason in failure
    assert verdict(out).startswith("result: NOT allocatable: device selector failed")
    assert "Traceback" not in out + err


def _sized_bundle() -> bytes:
    return documents(CLASS, device_slice("s", 2), claim({})).encode()


@pytest.mark.parametrize("over", [0, 1], ids=["at-the-limit", "one-byte-over"])
def test_a_bundle_is_read_up_to_the_size_limit_and_refused_past_it_naming_the_limit(
    over: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit is lowered to the bundle's own size (the reader looks it up at each read, and the
    bounded child is forked after the patch), so both sides of the boundary cost a few bytes."""
    data = _sized_bundle()
    limit = len(data) - over
    monkeypatch.setattr(bundle_yaml, "MAX_BUNDLE_BYTES", limit)
    code, out, err = explain(data)
    assert "Traceback" not in out + err
    if over:
        assert code == 2
        assert err.startswith("error: ")
        assert f"bundle.yaml: larger than the limit of {limit} bytes" in err
    else:
        assert code == 0, err
        assert verdict(out).startswith("result: allocatable")


def test_a_bundle_one_byte_over_the_real_size_limit_is_refused_naming_the_limit(tmp_path: Path) -> None:
    """The real constant, on a sparse file (no 64 MiB written): a valid bundle padded with NUL bytes,
    which would be a YAML error instead if the size were not checked first."""
    path = tmp_path / "bundle.yaml"
    path.write_bytes(_sized_bundle())
    os.truncate(path, bundle_yaml.MAX_BUNDLE_BYTES + 1)
    code, out, err = run_bounded(_explain_file, path)
    assert code == 2
    assert err.startswith("error: ")
    assert f"larger than the limit of {bundle_yaml.MAX_BUNDLE_BYTES} bytes" in err
    assert "Traceback" not in out + err


def _slice_of_size(characters: int) -> str:
    """A ResourceSlice whose YAML is exactly ``characters`` long, padded by one annotation.

    The padding is put in after dumping: PyYAML's emitter takes seconds over a 3 MiB scalar."""
    padded = device_slice("s", 2)
    padded["metadata"] = {"name": "s", "annotations": {"pad": "PAD"}}
    text = yaml.safe_dump(padded)
    text = text.replace(" pad: PAD\n", " pad: " + "p" * (characters - len(text) + 3) + "\n")
    assert len(text) == characters
    return text


def _slice_of_utf8_size(size: int, letter: str) -> str:
    """A ResourceSlice whose YAML is ``size`` bytes in UTF-8, its padding made of ``letter``."""
    text = _slice_of_size(1000)
    ascii_pad = text.split(" pad: ", 1)[1].split("\n", 1)[0]
    base = len(text.encode()) - len(ascii_pad)
    width = len(letter.encode())
    letters, rest = divmod(size - base, width)
    return text.replace(ascii_pad, letter * letters + "p" * rest)


@pytest.mark.parametrize("letter", ["é", "€", "𝄞"], ids=["2-byte", "3-byte", "4-byte"])
@pytest.mark.parametrize("over", [0, 1], ids=["at-the-limit", "one-byte-over"])
def test_an_object_in_multibyte_utf8_is_measured_in_bytes_like_the_api_server(letter: str, over: int) -> None:
    """The API server's limit is on the request's bytes: an object of fewer characters than the
    limit but more bytes is refused, and one of exactly the limit in bytes is read."""
    big = _slice_of_utf8_size(bundle_yaml.MAX_OBJECT_BYTES + over, letter)
    assert len(big.encode()) == bundle_yaml.MAX_OBJECT_BYTES + over
    assert len(big) < bundle_yaml.MAX_OBJECT_BYTES
    code, out, err = explain(documents(CLASS) + "---\n" + big + "---\n" + documents(claim({})))
    assert "Traceback" not in out + err
    if over:
        assert code == 2
        assert f"larger than {bundle_yaml.MAX_OBJECT_BYTES} bytes" in err
    else:
        assert code == 0, err


@pytest.mark.parametrize("over", [0, 1], ids=["at-the-limit", "one-character-over"])
def test_an_object_is_read_up_to_the_api_servers_limit_and_refused_past_it_naming_it(over: int) -> None:
    """The real 3 MiB limit: an object is measured from its first to its last character, so one
    whose YAML is exactly the limit is read and one character more is refused, wherever it stands."""
    big = _slice_of_size(bundle_yaml.MAX_OBJECT_BYTES + over)
    code, out, err = explain(documents(CLASS) + "---\n" + big + "---\n" + documents(claim({})))
    assert "Traceback" not in out + err
    if over:
        assert code == 2
        assert err.startswith("error: ")
        assert (
            f"the object ending here is larger than {bundle_yaml.MAX_OBJECT_BYTES} bytes, "
            "the API server's limit on a request"
        ) in err
    else:
        assert code == 0, err
        assert verdict(out).startswith("result: allocatable")
