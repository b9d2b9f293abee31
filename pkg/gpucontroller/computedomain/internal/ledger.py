"""The channel ledger: which domain holds which IMEX channel, in one ConfigMap (pure parts).

``status.channel`` alone cannot keep channels unique: two domains created at once are two objects,
and both passes would read channel 1 as free from the cache. The ledger is one object, so taking a
channel is an update with its resourceVersion, and of two passes that read the same ledger only one
write succeeds; the other conflicts and retries with the ledger as it now is. The domain's status
then records the channel it took. An entry whose domain no longer exists (the controller was not
running when it was deleted past its finalizer) is free again.

Data: ``"<channel>": "<domain UID> <namespace>/<name>"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from api.gpu.v1alpha1 import IMEX_MAX_CHANNEL

FIRST_CHANNEL: Final = 1
"""Channel 0 is never given: a host's driver may create it for everyone (NVreg_CreateImexChannel0)."""


@dataclass(frozen=True)
class Holder:
    uid: str
    domain: str
    """``<namespace>/<name>``, for people reading the ledger."""


def parse_ledger(data: Mapping[str, str] | None) -> dict[int, Holder]:
    """The ledger's entries; malformed ones (a hand edit) are dropped, not fatal."""
    entries: dict[int, Holder] = {}
    for key, value in (data or {}).items():
        uid, _, domain = value.partition(" ")
        if key.isdigit() and FIRST_CHANNEL <= int(key) <= IMEX_MAX_CHANNEL and uid:
            entries[int(key)] = Holder(uid=uid, domain=domain)
    return entries


def encode_ledger(entries: Mapping[int, Holder]) -> dict[str, str]:
    return {str(channel): f"{h.uid} {h.domain}" for channel, h in sorted(entries.items())}


def channel_of(entries: Mapping[int, Holder], uid: str) -> int | None:
    return next((channel for channel, holder in sorted(entries.items()) if holder.uid == uid), None)


def take_channel(
    entries: Mapping[int, Holder], *, uid: str, domain: str, live: set[str], in_use: set[int]
) -> tuple[int | None, dict[int, Holder]]:
    """The channel for the domain ``uid`` and the ledger to store.

    Its own entry if it has one; else the lowest channel held by no live domain (``live``: UIDs of
    the domains that exist) and in no domain's status (``in_use``). ``None`` when all are taken.
    """
    own = channel_of(entries, uid)
    if own is not None:
        return own, dict(entries)
    kept = {channel: holder for channel, holder in entries.items() if holder.uid in live}
    for channel in range(FIRST_CHANNEL, IMEX_MAX_CHANNEL + 1):
        if channel not in kept and channel not in in_use:
            kept[channel] = Holder(uid=uid, domain=domain)
            return channel, kept
    return None, kept


def release_channel(entries: Mapping[int, Holder], uid: str) -> dict[int, Holder]:
    return {channel: holder for channel, holder in entries.items() if holder.uid != uid}
