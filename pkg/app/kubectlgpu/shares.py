"""How big a held share is: its part of the card and its memory limit, sized as gpu-handler sizes it.

gpu-handler plans a share from the allocation alone (``pkg.gpuhandler.preparation.kinds.share``),
so the plugin can say what the share got without asking the node: the percentage is the
``sharePercent`` the scheduler consumed for it, else (a cluster without consumable capacity) the
MPS default of the share's config, else the whole card; the memory limit is the ``memory`` it
consumed or, for MPS that asked for none, its percentage of the card's memory, in whole MiB as the
MPS daemon is told. TimeSlicing limits no memory: a time-sliced share may use the card's memory
as far as the others leave it, so it has no limit to show.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from api.gpu.v1alpha1 import GpuConfigError, SharingStrategy, parse_gpu_config
from pkg.dra.allocator.quantity import QuantityError, parse_quantity

SHARE_PERCENT: Final = "sharePercent"
MEMORY: Final = "memory"
MIB: Final = 2**20


@dataclass(frozen=True)
class ShareSize:
    """A share's percentage of its card and its memory limit in bytes (None: no limit)."""

    percent: int
    memory_limit: int | None


class ShareSizeError(ValueError):
    """A consumed capacity or config the share cannot be sized from; the message says which."""


def share_size(
    strategy: str, consumed: Mapping[str, str], parameters: Any, card_memory: int | None
) -> ShareSize:
    """The size of a ``strategy`` share (``TimeSlicing`` or ``MPS``) from its result's consumed
    capacity, its config's opaque ``parameters`` and its card's memory capacity in bytes."""
    if SHARE_PERCENT in consumed:
        percent = _whole(consumed[SHARE_PERCENT], SHARE_PERCENT)
    else:
        percent = _configured_percent(parameters) or 100
    memory = _whole(consumed[MEMORY], MEMORY) if MEMORY in consumed else 0
    if strategy != SharingStrategy.MPS:
        return ShareSize(percent, None)
    if memory == 0:
        if card_memory is None:
            raise ShareSizeError("an MPS share whose card publishes no memory capacity")
        memory = card_memory * percent // 100
    return ShareSize(percent, memory // MIB * MIB)


def _configured_percent(parameters: Any) -> int | None:
    if parameters is None:
        return None
    try:
        sharing = parse_gpu_config(parameters).sharing
    except GpuConfigError as err:
        raise ShareSizeError(f"an invalid config: {err}") from None
    mps = sharing.mps if sharing is not None else None
    return mps.default_active_thread_percentage if mps is not None else None


def _whole(text: str, what: str) -> int:
    try:
        value = parse_quantity(text).as_int64()
    except QuantityError as err:
        raise ShareSizeError(f"consumed {what} {text!r}: {err}") from None
    if value is None or value < 0:
        raise ShareSizeError(f"consumed {what} {text!r}, not a whole non-negative number")
    return value
