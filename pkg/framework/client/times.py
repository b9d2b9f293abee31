"""Timestamps in the forms the API server accepts."""

from __future__ import annotations

from datetime import datetime


def micro_time(value: datetime) -> datetime:
    """A MicroTime the API server accepts: it wants six fractional digits, which pydantic omits
    when the fraction is zero, so that case drifts by one microsecond."""
    return value.replace(microsecond=1) if value.microsecond == 0 else value
