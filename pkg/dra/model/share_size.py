"""How big a TimeSlicing or MPS share is: its percentage of the card and the memory it gets.

gpu-handler sizes a share when it prepares it (``pkg.gpuhandler.preparation.kinds.share``) and
``kubectl gpu who`` shows the same size without asking the node, so the rule is written once, here,
and both read it. A share is sized from its allocation alone, never from the node's state, which
is what lets the plugin show it:

* the percentage is the ``sharePercent`` the scheduler consumed for it; a cluster without
  consumable capacity consumes none, and then the default of the share's config (MPS's default
  active thread percentage) is used, else the whole card;
* the memory is the ``memory`` it consumed; MPS enforces a memory limit, so an MPS share that
  asked for none gets its percentage of the card's memory. TimeSlicing enforces none: a
  time-sliced share may use whatever the others leave, so it has no limit.

Memory is counted in whole MiB, the unit the MPS control daemon is given. Parsing the quantities
and the config stays with each caller, which knows where they came from and says so in its errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from api.gpu.v1alpha1 import SharingStrategy

MIB: Final = 2**20
WHOLE_CARD: Final = 100  # percent


class ShareSizeError(ValueError):
    """The share cannot be sized: its percentage is outside 1..100 (the message says which)."""


@dataclass(frozen=True)
class ShareSize:
    """A share's percentage of its card and the memory it is sized to, in whole MiB."""

    percent: int
    memory_mib: int
    limited: bool  # whether the memory is enforced as a limit (MPS) or only recorded (TimeSlicing)

    @property
    def memory_limit_mib(self) -> int | None:
        return self.memory_mib if self.limited else None

    @property
    def memory_limit_bytes(self) -> int | None:
        return None if self.memory_limit_mib is None else self.memory_limit_mib * MIB


def share_size(
    strategy: str,
    *,
    consumed_percent: int | None,
    consumed_memory: int | None,
    default_percent: int | None,
    card_memory: Callable[[], int],
) -> ShareSize:
    """The size of a ``strategy`` share from what the scheduler consumed for it (``None``: nothing
    consumed), its config's default percentage, and its card's memory in bytes. ``card_memory`` is
    called only for an MPS share that consumed no memory, the one share sized from the card, so a
    caller reports a card without a memory capacity only where that matters."""
    percent = consumed_percent if consumed_percent is not None else default_percent or WHOLE_CARD
    if not 1 <= percent <= WHOLE_CARD:
        raise ShareSizeError(f"consumed sharePercent {percent}, not between 1 and {WHOLE_CARD}")
    memory = consumed_memory or 0
    limited = strategy == SharingStrategy.MPS
    if limited and memory == 0:
        memory = card_memory() * percent // WHOLE_CARD
    return ShareSize(percent, memory // MIB, limited)
