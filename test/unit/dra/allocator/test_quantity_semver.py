"""Quantity and semver as Kubernetes defines them (values checked against apimachinery 0.37)."""

from __future__ import annotations

import pytest

from pkg.dra.allocator import QuantityError, parse_quantity
from pkg.dra.allocator.semver import SemverError, normalize_and_parse, parse_semver


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1Gi", "1Gi"),
        ("24576Mi", "24Gi"),
        ("1536", "1536"),
        ("1000", "1k"),
        ("0.5", "500m"),
        ("0.5Gi", "512Mi"),
        ("1.5n", "2n"),
        ("-1.5k", "-1500"),
        ("1e3", "1e3"),
        ("2.5e2", "250"),
        ("Mi", "0"),
        ("+2", "2"),
        ("1E", "1E"),
    ],
)
def test_parse_and_print_like_apimachinery(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical


@pytest.mark.parametrize("text", ["", "1.2.3", "1e", "12Q", "1 Gi", "0x10", "1_0", "\u0663", "1e3e"])
def test_invalid_quantities(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e999999", "larger than the maximum of 9223372036854775807"),
        ("1e99999", "larger than the maximum"),
        ("9223372036854775808", "larger than the maximum"),
        ("1" * 5000, "(5000 characters) is larger than the maximum"),
        ("1e4294967296", "exponent out of range"),  # apimachinery would wrap it around to 1e0
    ],
)
def test_quantities_beyond_the_api_maximum_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(QuantityError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("9223372036854775807", "9223372036854775807"),  # the maximum itself
        ("16Ei", "9223372036854775807"),  # BinarySI is capped, as apimachinery caps it
        ("1e-999999", "1e-9"),  # below a nano unit: rounded up, never computed digit by digit
        ("0." + "0" * 5000 + "1", "1n"),
        ("1" + "0" * 30 + "e-30", "1"),
    ],
)
def test_extreme_but_valid_quantities(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical


def test_quantities_compare_and_add_exactly() -> None:
    q = parse_quantity
    assert q("24Gi") - q("12032Mi") - q("12032Mi") == q("512Mi")
    assert q("1Gi") == q("1073741824")
    assert q("0.1") + q("0.2") == q("300m")
    assert q("50k").as_int64() == 50000
    assert q("0.5").as_int64() is None


def test_semver_order_and_normalisation() -> None:
    assert parse_semver("1.2.3-alpha.1").compare(parse_semver("1.2.3-alpha.beta")) < 0
    assert parse_semver("1.2.3-rc.1").compare(parse_semver("1.2.3")) < 0
    assert parse_semver("1.2.3+build") == parse_semver("1.2.3")
    assert str(normalize_and_parse("v01.2")) == "1.2.0"
    with pytest.raises(SemverError):
        parse_semver("01.2.3")


@pytest.mark.parametrize(
    "text", ["9" * 5000 + ".0.0", "1.0.0-" + "1" * 30, "18446744073709551616.0.0", "\u0661.0.0"]
)
def test_semver_numbers_are_unsigned_64_bit_ascii(text: str) -> None:
    with pytest.raises(SemverError):
        parse_semver(text)
