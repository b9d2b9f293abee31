"""Family 3: quantities are parsed by Kubernetes' rules within its bounds, and a pool another driver
broke never breaks the others.

Quantities are generated from the grammar apimachinery accepts (sign, digits, fraction, every
suffix, exponents from small to ``1e999999``) plus arbitrary text. Each parse, in a bounded child,
must agree with an exact reference computed with :class:`fractions.Fraction` — rounded up to a
whole nano unit, BinarySI capped at 2^63-1, a decimal value above 2^63-1 an error — or be a
:class:`QuantityError`. Slices of a foreign driver with such capacities and counters are mixed with
one good pool; the good pool always serves and the broken one is reported.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st
from kubernetes.client import (
    V1Counter,
    V1CounterSet,
    V1Device,
    V1DeviceCapacity,
    V1DeviceCounterConsumption,
    V1ObjectMeta,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)
from testutil.unit.hostile.bounded import run_bounded

from pkg.dra.allocator import QuantityError, parse_quantity
from pkg.dra.allocator.pools import gather_pools

MAX = 2**63 - 1
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SHAPE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")


def reference(text: str) -> tuple[int, bool] | None:
    """(nanos, binary) by apimachinery's rules and the API's documented maximum; None: an error."""
    match = _SHAPE.fullmatch(text) if text else None
    if match is None:
        return None
    sign, whole, frac, suffix = match.groups()
    frac = frac or ""
    if suffix in _DECIMAL:
        scale, binary = Fraction(10) ** _DECIMAL[suffix], False
    elif suffix in _BINARY:
        scale, binary = Fraction(2) ** _BINARY[suffix], True
    elif re.fullmatch(r"[eE][+-]?[0-9]+", suffix) and abs(int(suffix[1:])) < 2**31:
        exponent = int(suffix[1:])
        if exponent > 60:  # certainly above the maximum unless the digits are all zero
            return (0, False) if not (whole + frac).strip("0") else None
        if exponent < -60:
            return (1 if (whole + frac).strip("0") else 0) * (-1 if sign == "-" else 1), False
        scale, binary = Fraction(10) ** exponent, False
    else:
        return None
    value = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac)) * scale
    nanos = math.ceil(value * 10**9)
    if binary:
        nanos = min(nanos, MAX * 10**9)
    elif nanos > MAX * 10**9:
        return None
    return (-nanos if sign == "-" else nanos), binary


_digits = st.text(alphabet="0123456789", max_size=22)
_suffix = st.one_of(
    st.sampled_from([*_DECIMAL, *_BINARY]),
    st.integers(-70, 70).map(lambda e: f"e{e}"),
    st.sampled_from(["e999999", "e99999", "E-999999", "e4294967296", "e+3", "E-0", "ki", "Ei2", "e"]),
)


@st.composite
def quantities(draw: st.DrawFn) -> str:
    fraction = draw(st.one_of(st.none(), _digits))
    text = draw(st.sampled_from(["", "+", "-"])) + draw(_digits)
    return text + ("" if fraction is None else "." + fraction) + draw(_suffix)


def _parse(text: str) -> tuple[int, bool] | str:
    try:
        quantity = parse_quantity(text)
    except QuantityError as err:
        return f"error: {err}"
    return quantity.nanos, quantity.format.value == "BinarySI"


@given(st.one_of(quantities(), st.text(max_size=30)))
def test_quantities_follow_apimachinery_within_the_api_maximum(text: str) -> None:
    parsed = run_bounded(_parse, text)
    expected = reference(text)
    if expected is None:
        assert isinstance(parsed, str), (text, parsed)
    else:
        assert not isinstance(parsed, str), (text, parsed)
        assert parsed[0] == expected[0], (text, parsed, expected)


@given(st.integers(0, 10**7))
def test_enormous_exponents_and_digit_strings_are_errors_at_once(size: int) -> None:
    for text in (f"1e{size * 10 + 20}", "9" * (size % 50_000 + 20), "0." + "0" * (size % 50_000) + "1"):
        run_bounded(_parse, text)  # an answer, whichever, within the bounds


def _slice(name: str, driver: str, capacity: str, counter: str) -> V1ResourceSlice:
    return V1ResourceSlice(
        metadata=V1ObjectMeta(name=name, resource_version="1"),
        spec=V1ResourceSliceSpec(
            driver=driver,
            pool=V1ResourcePool(name=name, generation=1, resource_slice_count=1),
            node_name="node-a",
            shared_counters=[V1CounterSet(name="set", counters={"c": V1Counter(value=counter)})],
            devices=[
                V1Device(
                    name="d",
                    capacity={"mem": V1DeviceCapacity(value=capacity)},
                    consumes_counters=[
                        V1DeviceCounterConsumption(counter_set="set", counters={"c": V1Counter(value="1")})
                    ],
                )
            ],
        ),
    )


def _gather(capacity: str, counter: str) -> list[tuple[str, bool, str | None]]:
    slices = [
        _slice("good", "gpu.deckhouse.io", "1Gi", "8"),
        _slice("other", "x.example.com", capacity, counter),
    ]
    return [(p.id.pool, p.usable, p.invalid) for p in gather_pools(slices, node=None)]


@given(st.one_of(quantities(), st.text(max_size=20)), st.one_of(quantities(), st.text(max_size=20)))
def test_a_foreign_pool_with_broken_quantities_is_skipped_and_the_good_one_serves(
    capacity: str, counter: str
) -> None:
    pools = run_bounded(_gather, capacity, counter)
    assert ("good", True, None) in pools
    other = next(p for p in pools if p[0] == "other")
    readable = reference(capacity) is not None and reference(counter) is not None
    assert other[1] is readable, other
    if not readable:
        assert other[2]  # the reason is reported
