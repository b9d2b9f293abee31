"""What the offer model needs to know about one card, and how to read it from a PhysicalGPU.

Offers are built from this small, frozen input rather than from the PhysicalGPU object itself, for
two reasons. The PhysicalGPU schema has no engine counts (SMs, copy engines, decoders, ...), yet
the counters that keep MIG placements apart need them; the caller supplies them per profile, as
NVML's ``nvmlGpuInstanceProfileInfo`` reports them (or, in tests, the model tables of
``test/fixtures/facts/mig-profiles.yaml``). And a plain value type lets every model be tested
without building whole Kubernetes objects.

A :class:`Placement` counts *memory* slices (NVML's ``nvmlGpuInstancePlacement_t``): on an A100
the 7g profile covers slices 0-7 although it has 7 compute slices. The card's number of memory
slices is therefore the end of its furthest placement, not a profile's ``sliceCount``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from api.gpu.v1alpha1 import SharingStrategy


@dataclass(frozen=True, slots=True)
class Engines:
    """Engine counts of a card or of one MIG instance; zero means "has none"."""

    multiprocessors: int = 0
    copy_engines: int = 0
    decoders: int = 0
    encoders: int = 0
    jpeg_engines: int = 0
    ofa_engines: int = 0

    def counters(self) -> dict[str, int]:
        """The non-zero counts under their counter names (``copy_engines`` → ``copy-engines``)."""
        return {f.name.replace("_", "-"): n for f in fields(self) if (n := getattr(self, f.name)) > 0}

    def media(self) -> int:
        """Media engines (NVDEC, NVENC, NVJPG, OFA): what sets ``+me`` profiles apart."""
        return self.decoders + self.encoders + self.jpeg_engines + self.ofa_engines

    @staticmethod
    def most(engines: list[Engines]) -> Engines:
        """The element-wise maximum: the card's totals are those of its largest profile."""
        return Engines(*(max((getattr(e, f.name) for e in engines), default=0) for f in fields(Engines)))


@dataclass(frozen=True, slots=True, order=True)
class Placement:
    start: int
    size: int

    @property
    def slices(self) -> range:
        return range(self.start, self.start + self.size)


@dataclass(frozen=True, slots=True)
class MigProfileSpec:
    """One GPU-instance profile: NVML profile ID, name, memory and where it can be placed."""

    profile_id: int
    name: str
    memory_mib: int
    slice_count: int
    placements: tuple[Placement, ...]
    engines: Engines = Engines()


@dataclass(frozen=True, slots=True)
class VgpuTypeSpec:
    """One vGPU type of a card in vGPU mode, as the kernel lists it (:mod:`pkg.hardware.mdev`):
    the mdev type ID (``nvidia-232``), its name (``GRID T4-4Q``), framebuffer and how many
    instances of it alone the card takes."""

    type_id: str
    name: str
    framebuffer_mib: int
    max_instances: int


@dataclass(frozen=True, slots=True)
class PartitionMode:
    """One way of cutting the whole card into ``count`` equal compute partitions.

    Some cards are partitioned by a card-wide *mode* rather than instance by instance: every
    partition of the card has the same size, and the mode switches only while the card is free.
    ``name`` is the mode as the driver spells it (lower-cased, a DNS label, e.g. ``cpx``);
    ``slots`` is how many of the card's compute slots (dies) one partition holds, so
    ``count * slots`` is the card's slot total; ``memory_mib`` is one partition's share.
    """

    name: str
    count: int
    slots: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class Card:
    """One physical card as the offer model sees it.

    ``physical_gpu`` is the PhysicalGPU object's name (a metric label); ``device`` the normalised
    model (``a30``); ``mig_allowed`` the node's ``gpu.deckhouse.io/allow-mig`` decision. ``engines``
    are the card's totals; left out, they are those of its largest MIG profile.

    ``partition_modes`` are the card-wide partition modes the card can be switched to (empty
    for cards partitioned instance by instance, or not at all); ``sharing`` the share strategies
    its backend can enforce (each becomes a shared offer).

    Topology (docs/topology.md), each ``None`` when its source did not say: ``pcie_root`` and
    ``numa_node`` from sysfs (:mod:`pkg.hardware.pci_topology`), ``nvlink_domain`` from the vendor
    library (cards that reach each other over NVLink through the same switches share it).

    ``vgpu_types`` are the card's mdev types when its host driver is NVIDIA's vGPU manager (read
    from sysfs, never guessed): such a card is offered as vGPUs and as a whole card for passthrough.
    """

    physical_gpu: str
    pci_address: str
    product_name: str
    device: str
    memory_mib: int
    vendor: str = "nvidia"
    architecture: str | None = None
    compute_capability: str | None = None
    driver_version: str | None = None
    uuid: str | None = None
    mig_profiles: tuple[MigProfileSpec, ...] = ()
    mig_allowed: bool = True
    engines: Engines | None = None
    pcie_root: str | None = None
    numa_node: int | None = None
    nvlink_domain: str | None = None
    partition_modes: tuple[PartitionMode, ...] = ()
    sharing: tuple[SharingStrategy, ...] = (SharingStrategy.TIME_SLICING, SharingStrategy.MPS)
    vgpu_types: tuple[VgpuTypeSpec, ...] = ()

    @property
    def vgpu_mode(self) -> bool:
        """The card's host driver is the vGPU manager: it offers vGPUs, not CUDA on the host."""
        return bool(self.vgpu_types)

    @property
    def base_name(self) -> str:
        return device_base_name(self.pci_address)

    @property
    def memory_slices(self) -> int:
        return max((p.start + p.size for prof in self.mig_profiles for p in prof.placements), default=0)

    @property
    def total_engines(self) -> Engines:
        if self.engines is not None:
            return self.engines
        return Engines.most([p.engines for p in self.mig_profiles])


def device_base_name(pci_address: str) -> str:
    """``0000:02:00.0`` → ``gpu-0000-02-00-0``: the card's device and counter-set name (a DNS label)."""
    return "gpu-" + pci_address.lower().replace(":", "-").replace(".", "-")
