"""Step 4, channel: the domain takes the lowest free channel through the ledger, once.

``status.channel`` never changes while the domain lives: claims already allocated select it, and
gpu-handler checks it on Prepare. A pass that finds the channel already in the ledger (the status
write of an earlier pass was lost) records that one again.
"""

from __future__ import annotations

from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.ledger import encode_ledger, parse_ledger, take_channel
from pkg.gpucontroller.computedomain.internal.service import ComputeDomainApi
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import REASON_NO_FREE_CHANNEL, not_ready


class ChannelHandler:
    name = "channel"

    def __init__(self, *, api: ComputeDomainApi) -> None:
        self._api = api

    def handle(self, state: ComputeDomainState) -> Result | None:
        if state.status.channel is not None:
            return None
        uid = str(state.domain.metadata.uid)
        ledger = self._api.read_ledger()
        entries = parse_ledger(ledger.data if ledger is not None else None)
        channel, updated = take_channel(
            entries,
            uid=uid,
            domain=state.name,
            live=set(state.live_domains),
            in_use=set(state.channels_in_use),
        )
        if channel is None:
            raise not_ready(
                state, reason=REASON_NO_FREE_CHANNEL, message="every IMEX channel is held by another domain"
            )
        if updated != entries or ledger is None:
            self._api.write_ledger(ledger, encode_ledger(updated))
        state.status.channel = channel
        return None
