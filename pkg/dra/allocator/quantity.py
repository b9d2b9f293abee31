"""Kubernetes ``resource.Quantity``: parse, compare, add, subtract and print, exactly.

Why our own: counters, capacities and CEL's ``quantity()`` all compare quantities, and a float would
say ``24Gi - 12032Mi - 12032Mi`` is not zero. Kubernetes rounds every parsed quantity up (away from
zero) to a whole number of nano units, so a quantity *is* an integer count of nanos. We store exactly
that (``nanos``), which makes every comparison and sum a Python ``int`` operation — cheap on the
allocator's hot path — and exact for any size.

The grammar and rounding follow ``k8s.io/apimachinery/pkg/api/resource.ParseQuantity``::

    <quantity> ::= <sign>? <digits>? ("." <digits>?)? <suffix>
    <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei | n | u | m | "" | k | M | G | T | P | E
                 | (e | E) <sign>? <digits>

Bounds (the API's documented limit: "no quantity may represent a number greater than 2^63-1 in
magnitude"): BinarySI values above 2^63-1 are capped, as apimachinery caps them; a decimal value
above it is a :class:`QuantityError` (apimachinery would keep it as an arbitrary-precision
decimal; we refuse rather than compute with million-digit numbers); an exponent outside 32 bits
is an error (apimachinery silently wraps it); a value below one nano unit rounds up to ``1n``.
Parsing takes time linear in the text's length, whatever the exponent.

``str()`` prints the canonical form Kubernetes would serialise (``1Gi``, ``1536``, ``500m``,
``12k``).
"""

from __future__ import annotations

import enum
import functools
import re
from decimal import ROUND_CEILING, Decimal, localcontext

NANO = 10**9
_INT64_MAX = 2**63 - 1
_MAX_BINARY_NANOS = _INT64_MAX * NANO

_PATTERN = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_SHAPE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity (the message matches the apimachinery one)."""


class Format(enum.Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


class Quantity:
    """An exact quantity: ``nanos`` (value x 10^9, an int) plus the format used to print it."""

    __slots__ = ("format", "nanos")

    def __init__(self, nanos: int, fmt: Format = Format.DECIMAL_SI) -> None:
        self.nanos = nanos
        self.format = fmt

    # Comparison is by value only, as resource.Quantity.Cmp and Equal are.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.nanos == other.nanos

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        return self.nanos >= other.nanos

    def __add__(self, other: Quantity) -> Quantity:
        # Like Quantity.Add: a zero receiver takes the other operand's format.
        return Quantity(self.nanos + other.nanos, self.format if self.nanos else other.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos - other.nanos, self.format if self.nanos else other.format)

    def sign(self) -> int:
        return (self.nanos > 0) - (self.nanos < 0)

    def as_int64(self) -> int | None:
        """The value as an int64, or None when it is fractional or out of range (``AsInt64``)."""
        whole, frac = divmod(self.nanos, NANO)
        if frac or not -(2**63) <= whole <= _INT64_MAX:
            return None
        return whole

    def value(self) -> int:
        """``ceil(value)``, as ``Quantity.Value``."""
        return -((-self.nanos) // NANO)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __str__(self) -> str:
        return _canonical(self.nanos, self.format)


def parse_quantity(text: str) -> Quantity:
    """Parse like ``resource.ParseQuantity``; raises :class:`QuantityError`. Short texts are cached.

    Bounded by the length of ``text`` alone: a value's magnitude is judged from its digits and
    exponent before any arithmetic, so ``1e999999`` is refused at once instead of building a
    million-digit number.
    """
    if len(text) <= _CACHED_LENGTH:
        return _parse_cached(text)
    return _parse(text)


_CACHED_LENGTH = 64  # caching long texts would let hostile input pin memory


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> Quantity:
    return _parse(text)


def _parse(text: str) -> Quantity:
    match = _PATTERN.fullmatch(text) if text else None
    if match is None:
        raise QuantityError(f"quantities must match the regular expression {_SHAPE!r}: {_shown(text)}")
    # Like apimachinery, a missing number ("Mi", ".") reads as zero.
    sign, whole, frac, suffix = match.groups()
    fmt, base, exponent = _interpret_suffix(suffix, text)
    frac = frac or ""
    digits = (whole + frac).lstrip("0")
    scale = exponent - len(frac) if base == 10 else -len(frac)  # value = digits x 10^scale (x 2^exponent)
    stripped = digits.rstrip("0")
    scale += len(digits) - len(stripped)
    digits = stripped
    if not digits:
        return Quantity(0, fmt)
    # The most significant digit is 10^top; a binary suffix multiplies by at most 2^60 < 10^19.
    top = len(digits) - 1 + scale
    if base == 2 and top >= 19:
        nanos = _MAX_BINARY_NANOS  # apimachinery caps BinarySI at 2^63-1
    elif base == 10 and top >= 19:
        raise _too_large(text)
    elif top < -40:
        nanos = 1  # far below a nano unit: rounded up to 1n, as apimachinery does
    else:
        with localcontext() as ctx:
            ctx.prec = len(digits) + 64
            exact = Decimal(digits).scaleb(scale + 9)
            if base == 2:
                exact *= 2**exponent
            nanos = int(exact.to_integral_value(rounding=ROUND_CEILING))
        if base == 2:
            nanos = min(nanos, _MAX_BINARY_NANOS)
        elif nanos > _MAX_BINARY_NANOS:
            raise _too_large(text)
    if fmt is Format.BINARY_SI and 0 < nanos < NANO:
        fmt = Format.DECIMAL_SI
    return Quantity(-nanos if sign == "-" else nanos, fmt)


def _too_large(text: str) -> QuantityError:
    return QuantityError(f"quantity {_shown(text)} is larger than the maximum of {_INT64_MAX} (2^63-1)")


def _shown(text: str) -> str:
    """The text for a message: quoted, and cut short when an attacker made it long."""
    return repr(text) if len(text) <= 80 else f"{text[:40]!r}... ({len(text)} characters)"


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _interpret_suffix(suffix: str, text: str) -> tuple[Format, int, int]:
    if suffix in _DECIMAL:
        return Format.DECIMAL_SI, 10, _DECIMAL[suffix]
    if suffix in _BINARY:
        return Format.BINARY_SI, 2, _BINARY[suffix]
    # "e"/"E" and a signed 64-bit integer, as apimachinery parses it; beyond int32 it would wrap
    # around there (1e4294967296 reads as 1), so such an exponent is refused here instead.
    if len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT.fullmatch(suffix[1:]):
        digits = suffix[1:].lstrip("+-").lstrip("0")
        if len(digits) <= 10:
            exponent = int(suffix[1:])
            if -(2**31) <= exponent < 2**31:
                return Format.DECIMAL_EXPONENT, 10, exponent
        raise QuantityError(f"quantity {_shown(text)}: exponent out of range (a 32-bit integer)")
    raise QuantityError(f"unable to parse quantity's suffix: {_shown(text)}")


_EXPONENT = re.compile(r"[+-]?[0-9]+")


def _canonical(nanos: int, fmt: Format) -> str:
    if nanos == 0:
        return "0"
    if fmt is Format.BINARY_SI:
        if -1024 * NANO < nanos < 1024 * NANO or nanos % NANO:
            fmt = Format.DECIMAL_SI
        else:
            whole = nanos // NANO
            power = 0
            while power < 6 and whole % 1024 == 0:
                whole //= 1024
                power += 1
            return f"{whole}{_BINARY_SUFFIX[power]}"
    # value = mantissa x 10^exponent with the largest exponent that is a multiple of 3.
    mantissa, exponent = nanos, -9
    while mantissa % 1000 == 0 and (fmt is Format.DECIMAL_EXPONENT or exponent < 18):
        mantissa //= 1000
        exponent += 3
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"
