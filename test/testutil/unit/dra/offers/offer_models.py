"""GPU models for offer tests: the best estimates of ``test/fixtures/facts/mig-profiles.yaml``,
restated as data.

Each profile row is ``(name, profile ID, memory MiB, compute slices, max instances, engines,
placements)`` with engines ``(SMs, copy engines, decoders, encoders, JPEG, OFA)`` and placements
``(start, size)`` in memory slices, as NVML reports them on hardware. Three values are missing in
the data and filled here: H200 ``3g.71gb`` and ``4g.71gb`` memory (uncaptured) is taken as half of
``7g.141gb``'s 143360 MiB, matching their 4 of 8 memory slices; H200 ``1g.35gb``'s SM count
(uncaptured) is the 26 of its H100 analogue ``1g.20gb`` (same GH100 die). L4 has no MIG.
"""

from __future__ import annotations

from dataclasses import replace

from pkg.dra.model.card import Card, Engines, MigProfileSpec, Placement

Row = tuple[str, int, int, int, int, tuple[int, int, int, int, int, int], tuple[tuple[int, int], ...]]


def _ones(n: int) -> tuple[tuple[int, int], ...]:
    return tuple((i, 1) for i in range(n))


_TWOS = ((0, 2), (2, 2), (4, 2), (6, 2))
_THREE_TWOS = ((0, 2), (2, 2), (4, 2))
_HALVES = ((0, 4), (4, 4))

# product name, memory MiB, architecture, compute capability, total compute slices, profiles
# fmt: off
MODELS: dict[str, tuple[str, int, str, str, int, tuple[Row, ...]]] = {
    "A30": ("NVIDIA A30", 24576, "Ampere", "8.0", 4, (
        ("1g.6gb", 14, 5952, 1, 4, (14, 1, 1, 0, 0, 0), _ones(4)),
        ("1g.6gb+me", 21, 5952, 1, 1, (14, 1, 1, 0, 1, 1), _ones(4)),
        ("2g.12gb", 5, 11968, 2, 2, (28, 2, 2, 0, 0, 0), ((0, 2), (2, 2))),
        ("2g.12gb+me", 6, 11968, 2, 1, (28, 2, 2, 0, 1, 1), ((0, 2), (2, 2))),
        ("4g.24gb", 0, 24000, 4, 1, (56, 4, 4, 0, 1, 1), ((0, 4),)),
    )),
    "A100-40GB": ("NVIDIA A100-SXM4-40GB", 40960, "Ampere", "8.0", 7, (
        ("1g.5gb", 19, 4864, 1, 7, (14, 1, 0, 0, 0, 0), _ones(7)),
        ("1g.5gb+me", 20, 4864, 1, 1, (14, 1, 1, 0, 1, 1), _ones(7)),
        ("1g.10gb", 15, 9984, 1, 4, (14, 1, 1, 0, 0, 0), _TWOS),
        ("2g.10gb", 14, 9984, 2, 3, (28, 2, 1, 0, 0, 0), _THREE_TWOS),
        ("3g.20gb", 9, 20096, 3, 2, (42, 3, 2, 0, 0, 0), _HALVES),
        ("4g.20gb", 5, 20096, 4, 1, (56, 4, 2, 0, 0, 0), ((0, 4),)),
        ("7g.40gb", 0, 40448, 7, 1, (98, 7, 5, 0, 1, 1), ((0, 8),)),
    )),
    "A100-80GB": ("NVIDIA A100-SXM4-80GB", 81920, "Ampere", "8.0", 7, (
        ("1g.10gb", 19, 9728, 1, 7, (14, 1, 0, 0, 0, 0), _ones(7)),
        ("1g.10gb+me", 20, 9728, 1, 1, (14, 1, 1, 0, 1, 1), _ones(7)),
        ("1g.20gb", 15, 19968, 1, 4, (14, 1, 1, 0, 0, 0), _TWOS),
        ("2g.20gb", 14, 19968, 2, 3, (28, 2, 1, 0, 0, 0), _THREE_TWOS),
        ("3g.40gb", 9, 40192, 3, 2, (42, 3, 2, 0, 0, 0), _HALVES),
        ("4g.40gb", 5, 40192, 4, 1, (56, 4, 2, 0, 0, 0), ((0, 4),)),
        ("7g.80gb", 0, 80896, 7, 1, (98, 7, 5, 0, 1, 1), ((0, 8),)),
    )),
    "H100": ("NVIDIA H100 80GB HBM3", 81559, "Hopper", "9.0", 7, (
        ("1g.10gb", 19, 9984, 1, 7, (16, 1, 1, 0, 1, 0), _ones(7)),
        ("1g.10gb+me", 20, 9984, 1, 1, (16, 1, 1, 0, 1, 1), _ones(7)),
        ("1g.20gb", 15, 20096, 1, 4, (26, 1, 1, 0, 1, 0), _TWOS),
        ("2g.20gb", 14, 20096, 2, 3, (32, 2, 2, 0, 2, 0), _THREE_TWOS),
        ("3g.40gb", 9, 40448, 3, 2, (60, 3, 3, 0, 3, 0), _HALVES),
        ("4g.40gb", 5, 40448, 4, 1, (64, 4, 4, 0, 4, 0), ((0, 4),)),
        ("7g.80gb", 0, 81152, 7, 1, (132, 8, 7, 0, 7, 1), ((0, 8),)),
    )),
    "H200": ("NVIDIA H200", 143771, "Hopper", "9.0", 7, (
        ("1g.18gb", 19, 16384, 1, 7, (16, 1, 1, 0, 1, 0), _ones(7)),
        ("1g.18gb+me", 20, 16384, 1, 1, (16, 1, 1, 0, 1, 1), _ones(7)),
        ("1g.35gb", 15, 33280, 1, 4, (26, 1, 1, 0, 1, 0), _TWOS),
        ("2g.35gb", 14, 33280, 2, 3, (32, 2, 2, 0, 2, 0), _THREE_TWOS),
        ("3g.71gb", 9, 71680, 3, 2, (60, 3, 3, 0, 3, 0), _HALVES),
        ("4g.71gb", 5, 71680, 4, 1, (64, 4, 4, 0, 4, 0), ((0, 4),)),
        ("7g.141gb", 0, 143360, 7, 1, (132, 8, 7, 0, 7, 1), ((0, 8),)),
    )),
    "L4": ("NVIDIA L4", 23034, "Ada Lovelace", "8.9", 0, ()),
}
# fmt: on

MIG_MODELS = tuple(k for k, v in MODELS.items() if v[5])
DEVICE_LABEL = {"A30": "a30", "A100-40GB": "a100-sxm4-40gb", "A100-80GB": "a100-sxm4-80gb",
                "H100": "h100-80gb-hbm3", "H200": "h200", "L4": "l4"}  # fmt: skip


def profile(row: Row) -> MigProfileSpec:
    name, profile_id, memory, slices, _, engines, placements = row
    return MigProfileSpec(
        profile_id=profile_id,
        name=name,
        memory_mib=memory,
        slice_count=slices,
        placements=tuple(Placement(s, n) for s, n in placements),
        engines=Engines(*engines),
    )


def max_instances(model: str) -> dict[str, int]:
    return {row[0]: row[4] for row in MODELS[model][5]}


def compute_slices(model: str) -> int:
    return MODELS[model][4]


def card(model: str, pci: str = "0000:02:00.0", **changes: object) -> Card:
    """A card of ``model`` at ``pci``; ``changes`` override any :class:`Card` field."""
    product, memory, arch, cc, _, rows = MODELS[model]
    base = Card(
        physical_gpu=f"node-a-{pci[5:7]}-10de",
        pci_address=pci,
        product_name=product,
        device=DEVICE_LABEL[model],
        memory_mib=memory,
        architecture=arch,
        compute_capability=cc,
        driver_version="580.76.05",
        uuid=f"GPU-{pci.replace(':', '').replace('.', '')}-0000-0000-0000-000000000000",
        mig_profiles=tuple(profile(r) for r in rows),
    )
    return replace(base, **changes)  # type: ignore[arg-type]
