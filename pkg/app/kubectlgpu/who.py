"""``kubectl gpu who``: which Pod and claim hold each of our cards, MIG devices and shares.

The rows come from ResourceClaims (``status.allocation.devices.results`` says what is held,
``status.reservedFor`` by which Pods), which a namespace user may read in their namespace. What
the claims do not say — the kind of device, the card's PhysicalGPU, UUID and PCI address — is
joined from ResourceSlices and PhysicalGPUs when the user may read them; otherwise those cells
show ``<unknown>`` and :mod:`.cli` says which read was refused. A share's row says its
percentage of the card and its memory limit (:mod:`.shares`). With ``--node`` (that node) or
``--free`` (every node) and readable slices, what nobody holds gets ``<free>`` rows
(:mod:`.free`), so the answer covers the node or the cluster; a node's IMEX channels are one such
row, ``imex-channel-*``, whose SHARE is how many no claim holds of how many are offered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pkg.app.kubectlgpu.catalogue import UNKNOWN, Catalogue, DeviceFacts
from pkg.app.kubectlgpu.claims import Held, held
from pkg.app.kubectlgpu.device_conditions import NOT_PREPARED, DeviceConditions, device_conditions
from pkg.app.kubectlgpu.free import Free, free_capacity
from pkg.app.kubectlgpu.shares import held_share_size
from pkg.app.kubectlgpu.table import Column, Row, bytes_text
from pkg.dra.model.share_size import ShareSizeError

KIND: Final = "GPUHolderList"
COLUMNS: Final = (
    Column("NAMESPACE"),
    Column("CLAIM"),
    Column("PODS"),
    Column("NODE"),
    Column("DEVICE"),
    Column("TYPE"),
    Column("SHARE"),
    Column("MEMORY-LIMIT"),
    Column("PHYSICALGPU"),
    Column("STATUS", wide=True),
    Column("REQUEST", wide=True),
    Column("SHARE-ID", wide=True),
    Column("PCI", wide=True),
    Column("UUID", wide=True),
    Column("PRODUCT", wide=True),
)
FREE: Final = "<free>"
NO_LIMIT: Final = "<none>"
NOT_SHARED: Final = "<none>"
"""SHARE and MEMORY-LIMIT of a device that is not a share (kubectl leaves no cell empty)."""
__all__ = ["COLUMNS", "FREE", "KIND", "NOT_SHARED", "NO_LIMIT", "UNKNOWN", "Catalogue", "who_view"]


def who_view(
    claims: Sequence[dict[str, Any]],
    catalogue: Catalogue | None,
    *,
    node: str | None = None,
    free: bool = False,
    holders: Sequence[dict[str, Any]] | None = None,
) -> list[Row]:
    """The rows of ``kubectl gpu who``, sorted by node, device, claim.

    Without ``free``: one row per device ``claims`` hold (on ``node`` only, when given) and, with
    ``node`` and a catalogue, a ``<free>`` row for what nobody holds on that node. With ``free``:
    only the ``<free>`` rows, of every node (or of ``node``). What is free is judged against
    ``holders`` (default: ``claims``): the claims of every namespace where the caller may list
    them, since a card held in another namespace is not free."""
    rows: list[tuple[tuple[str, ...], Row]] = []
    if not free:
        for claim in claims:
            states = {(d.pool, d.device, d.share_id): d for d in device_conditions(claim)}
            for h in held(claim):
                if node is None or h.node == node:
                    facts = catalogue.facts(h.pool, h.device) if catalogue else None
                    state = states.get((h.pool, h.device, h.share_id))
                    rows.append(((h.node, h.device, h.namespace, h.claim), _row(h, facts, state)))
    if catalogue is not None and (free or node is not None):
        holdings = [h for claim in (claims if holders is None else holders) for h in held(claim)]
        for f in free_capacity(catalogue, holdings, node=node):
            rows.append(((f.node, f.device, "", ""), _free_row(f)))
    rows.sort(key=lambda pair: pair[0])
    return [row for _, row in rows]


def _share_cells(h: Held, facts: DeviceFacts | None) -> tuple[str, str, dict[str, Any]]:
    """The SHARE and MEMORY-LIMIT cells of a held device, and their JSON fields. No cell is left
    empty, as kubectl leaves none, so a script may split a row on blanks: a device that is not a
    share shows ``<none>``, one whose slices could not be read ``<unknown>``."""
    if facts is None:
        return UNKNOWN, UNKNOWN, {}
    if not facts.shared:
        return NOT_SHARED, NOT_SHARED, {}
    try:
        size = held_share_size(facts.strategy, h.consumed, h.parameters, facts.memory)
    except ShareSizeError:
        return UNKNOWN, UNKNOWN, {}
    limit = NO_LIMIT if size.memory_limit_bytes is None else bytes_text(size.memory_limit_bytes)
    return (
        f"{size.percent}%",
        limit,
        {"sharePercent": size.percent, "memoryLimitBytes": size.memory_limit_bytes},
    )


def _row(h: Held, facts: DeviceFacts | None, state: DeviceConditions | None) -> Row:
    """A held device's row; STATUS is whether gpu-handler prepared it and finds it healthy."""
    f = facts or DeviceFacts(UNKNOWN, "", "", "", "", "")
    share, limit, share_item = _share_cells(h, facts)
    cells = {
        "NAMESPACE": h.namespace,
        "CLAIM": h.claim,
        "PODS": ",".join(h.pods) or "<none>",
        "NODE": h.node or UNKNOWN,
        "DEVICE": h.device,
        "TYPE": f.kind,
        "SHARE": share,
        "MEMORY-LIMIT": limit,
        "PHYSICALGPU": f.physical_gpu or (UNKNOWN if facts is None else NOT_SHARED if f.channel else f.card),
        "STATUS": state.status_text() if state is not None else NOT_PREPARED,
        "REQUEST": h.request,
        "SHARE-ID": h.share_id or "",
        "PCI": f.pci,
        "UUID": f.uuid,
        "PRODUCT": f.product,
    }
    item = {
        "namespace": h.namespace,
        "claim": h.claim,
        "pods": list(h.pods),
        "node": h.node,
        "request": h.request,
        "pool": h.pool,
        "device": h.device,
        "shareID": h.share_id,
        "type": None if facts is None else f.kind,
        **share_item,
        "physicalGPU": f.physical_gpu or None,
        "pciAddress": f.pci or None,
        "uuid": f.uuid or None,
        **_conditions_item(state),
    }
    return Row(cells, item)


def _conditions_item(state: DeviceConditions | None) -> dict[str, Any]:
    if state is None:
        return {"conditions": {}}
    whole = state.to_item()
    return {
        "conditions": whole["conditions"],
        **({"problems": whole["problems"]} if "problems" in whole else {}),
    }


def _free_row(free: Free) -> Row:
    f = free.facts
    share = NOT_SHARED if free.percent is None else f"{free.percent}%"
    if free.channels is not None:
        share = "{}/{}".format(*free.channels)  # IMEX channels held by no claim / offered
    limit = (
        NOT_SHARED if free.percent is None else NO_LIMIT if free.memory is None else bytes_text(free.memory)
    )
    cells = {
        "NAMESPACE": "",
        "CLAIM": FREE,
        "PODS": "",
        "NODE": free.node,
        "DEVICE": free.device,
        "TYPE": f.kind,
        "SHARE": share,
        "MEMORY-LIMIT": limit,
        "PHYSICALGPU": f.physical_gpu or (NOT_SHARED if f.channel else f.card),
        "STATUS": NOT_SHARED,
        "PCI": f.pci,
        "UUID": f.uuid,
        "PRODUCT": f.product,
    }
    item: dict[str, Any] = {
        "node": free.node,
        "device": free.device,
        "free": True,
        "type": f.kind,
        "physicalGPU": f.physical_gpu or None,
        "uuid": f.uuid or None,
    }
    if free.percent is not None:
        item |= {"sharePercent": free.percent, "memoryBytes": free.memory}
    if free.channels is not None:
        item |= {"imexChannels": {"free": free.channels[0], "offered": free.channels[1]}}
    return Row(cells, item)
