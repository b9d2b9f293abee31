"""Best fit's tie-break for a request of several devices: keep them in one NVLink domain and PCIe root.

A multi-GPU job runs faster when its cards talk over one NVLink domain and sit under one PCIe root
(docs/topology.md). A claim can *demand* that with ``matchAttribute``; this is the preference for
claims that do not: among candidates best fit ranks equal — same node, same free memory slices and
memory, i.e. interchangeable cards — the cards of one group come together, so the search's
combinations (tried in stream order) fill one group before touching the next.

The groups are ordered for the request's device count ``n`` the way best fit orders cards: the
smallest group that can hold all ``n`` first (a larger group stays whole for a larger claim), then
groups too small for ``n``, largest first (the fewest groups for what is left). NVLink domain
(``gpu.deckhouse.io/nvlinkDomain``) decides before PCIe root (``resource.kubernetes.io/pcieRoot``):
one domain with two roots beats two domains. Cards without the attribute come after those with it;
a run where every card has the same values keeps its order, so pools without topology attributes
(and requests of one device) are allocated exactly as before.

What it does not do: it does not look across requests of one claim (``matchAttribute`` is the tool
for that), nor across runs of different rank (a partly used card still comes before a free one —
packing wins over topology), nor does ``explain``'s device listing apply it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator, Sequence

from pkg.dra.allocator.constraints import lookup_attribute
from pkg.dra.allocator.pools import Candidate
from pkg.dra.model.attributes import NVLINK_DOMAIN, PCIE_ROOT

RankedChunk = tuple[tuple[object, ...], Sequence[Candidate]]  # (best fit's rank key, one card's devices)

_UNKNOWN = (2, 0, 0)  # sorts after every known group


def keep_together(ranked: Iterator[RankedChunk], count: int) -> Iterator[Sequence[Candidate]]:
    """The cards of ``ranked`` (best fit's order, with rank keys) with each run of equally ranked,
    fitting cards of one pool regrouped by topology for a request of ``count`` devices."""
    run: list[Sequence[Candidate]] = []
    run_key: Hashable = None
    for key, members in ranked:
        this = _run_key(key, members)
        if run and (this is None or this != run_key):
            yield from _regroup(run, count)
            run = []
        if this is None:
            yield members
            continue
        run_key = this
        run.append(members)
    yield from _regroup(run, count)


def _run_key(key: tuple[object, ...], members: Sequence[Candidate]) -> Hashable:
    """What makes cards interchangeable for best fit: fitting, the same free slices and memory,
    the same pool. ``None`` for a chunk that is never regrouped."""
    first = members[0]
    if key[0] or first.card is None:  # does not fit, or not a card: keep its place
        return None
    return (key[1], key[2], first.pool.id)


def _regroup(run: list[Sequence[Candidate]], count: int) -> list[Sequence[Candidate]]:
    if len(run) < 2:
        return run
    places = [(_value(m[0], NVLINK_DOMAIN), _value(m[0], PCIE_ROOT)) for m in run]
    if len(set(places)) == 1:
        return run
    domain_size = Counter(domain for domain, _ in places)
    root_size = Counter(places)
    first_domain: dict[object, int] = {}
    first_root: dict[object, int] = {}
    for i, place in enumerate(places):
        first_domain.setdefault(place[0], i)
        first_root.setdefault(place, i)

    def rank(i: int) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        domain, root = places[i]
        by_domain = _UNKNOWN if domain is None else _fit(domain_size[domain], first_domain[domain], count)
        by_root = _UNKNOWN if root is None else _fit(root_size[places[i]], first_root[places[i]], count)
        return by_domain, by_root, i

    return [run[i] for i in sorted(range(len(run)), key=rank)]


def _fit(size: int, first: int, count: int) -> tuple[int, int, int]:
    """Groups that hold ``count`` first, smallest first; then the others, largest first."""
    return (0, size, first) if size >= count else (1, -size, first)


def _value(cand: Candidate, attribute: str) -> object:
    found = lookup_attribute(cand, attribute)
    return None if found is None or found[0] == "unknown" else found[1]
