"""A held share's size as gpu-handler sizes it, read from what a claim's allocation says.

The rule is :mod:`pkg.dra.model.share_size`, the one gpu-handler prepares the share by; this module
only reads its inputs from the API's text: the consumed ``sharePercent`` and ``memory`` of the
allocation result, the default percentage of the share's opaque config (MPS's default active
thread percentage), and the card's memory as the slice publishes it. Whatever of those cannot be
read makes the share unsizable (:class:`ShareSizeError`), and ``kubectl gpu who`` shows
``<unknown>`` rather than a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from api.gpu.v1alpha1 import GpuConfigError, parse_gpu_config
from pkg.dra.allocator.quantity import QuantityError, parse_quantity
from pkg.dra.model.share_size import ShareSize, ShareSizeError, share_size

SHARE_PERCENT: Final = "sharePercent"
MEMORY: Final = "memory"


def held_share_size(
    strategy: str, consumed: Mapping[str, str], parameters: Any, card_memory: int | None
) -> ShareSize:
    """The size of a ``strategy`` share (``TimeSlicing`` or ``MPS``) from its result's consumed
    capacity, its config's opaque ``parameters`` and its card's memory capacity in bytes."""

    def memory_of_card() -> int:
        if card_memory is None:
            raise ShareSizeError("an MPS share whose card publishes no memory capacity")
        return card_memory

    return share_size(
        strategy,
        consumed_percent=_whole(consumed, SHARE_PERCENT),
        consumed_memory=_whole(consumed, MEMORY),
        default_percent=_configured_percent(parameters),
        card_memory=memory_of_card,
    )


def _configured_percent(parameters: Any) -> int | None:
    if parameters is None:
        return None
    try:
        sharing = parse_gpu_config(parameters).sharing
    except GpuConfigError as err:
        raise ShareSizeError(f"an invalid config: {err}") from None
    mps = sharing.mps if sharing is not None else None
    return mps.default_active_thread_percentage if mps is not None else None


def _whole(consumed: Mapping[str, str], what: str) -> int | None:
    if what not in consumed:
        return None
    text = consumed[what]
    try:
        value = parse_quantity(text).as_int64()
    except QuantityError as err:
        raise ShareSizeError(f"consumed {what} {text!r}: {err}") from None
    if value is None or value < 0:
        raise ShareSizeError(f"consumed {what} {text!r}, not a whole non-negative number")
    return value
