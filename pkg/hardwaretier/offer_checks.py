"""``gpu-handler offers`` against the card: its output read back, and every difference named.

Three questions, each answered with a list of differences (empty: none), so a failing check
prints all of them at once, each naming the slice, device or card it is about:

* :func:`slice_rule_violations` — would the API server take these slices? The per-slice limits
  are the project's own client-side checks (:func:`~pkg.dra.model.limits.validate_slice`, the
  ones the unit tier holds the offer model to); across slices, every counter a device consumes
  must exist in the pool's counter sets and fit what the set holds, and the pool's slice count
  must be the number of slices.
* :func:`fact_mismatches` — do the published PhysicalGPU and offers say what NVML says: the
  product, UUID, memory and compute capability on the exclusive offer, and one MIG offer for
  every profile and placement NVML reports (none on a card without MIG)?
* :func:`mig_table_mismatches` — does the built-in MIG table of the card's PCI device ID say
  what NVML reports? The backend falls back to the table when NVML cannot answer, so a wrong
  row would publish offers the card cannot make.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes.client import V1Device, V1DeviceAttribute, V1ResourceSlice

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends.nvidia.nvml_port import MIG_DISABLED, MIG_ENABLED
from pkg.backends.nvidia.profiles import ModelFacts, ProfileFacts
from pkg.dra.allocator.quantity import parse_quantity
from pkg.dra.model.attributes import clip, key, mib_quantity
from pkg.dra.model.limits import SliceLimitError, validate_slice
from pkg.hardwaretier.nvml_facts import CardFacts

_MIG_MODES = {MIG_DISABLED: "Disabled", MIG_ENABLED: "Enabled"}


@dataclass(frozen=True)
class OffersOutput:
    """``gpu-handler offers``' YAML, parsed: the PhysicalGPUs and the ResourceSlices."""

    gpus: tuple[PhysicalGPU, ...]
    slices: tuple[V1ResourceSlice, ...]

    def gpu_at(self, address: str) -> PhysicalGPU | None:
        return next(
            (g for g in self.gpus if g.status and g.status.pci_info and g.status.pci_info.address == address),
            None,
        )

    def pci_device_id(self, address: str) -> str | None:
        gpu = self.gpu_at(address)
        info = gpu.status.pci_info if gpu and gpu.status else None
        return info.device.id if info else None

    def condition(self, address: str, condition_type: str) -> str | None:
        """The status (``"True"``…) of the card's PhysicalGPU condition, ``None`` when absent."""
        gpu = self.gpu_at(address)
        conditions = (gpu.status.conditions if gpu and gpu.status else None) or []
        return next((c.status for c in conditions if c.type == condition_type), None)

    def devices_of(self, address: str) -> list[V1Device]:
        """Every offer of the card at ``address``, in slice order."""
        return [
            d for rs in self.slices for d in rs.spec.devices or [] if attribute(d, "pciAddress") == address
        ]

    def exclusive_offer(self, address: str) -> V1Device | None:
        """The card's whole, exclusive offer (``deviceType`` Physical, ``sharingStrategy`` Exclusive)."""
        return next(
            (
                d
                for d in self.devices_of(address)
                if attribute(d, "deviceType") == "Physical" and attribute(d, "sharingStrategy") == "Exclusive"
            ),
            None,
        )


def parse_offers(text: str) -> OffersOutput:
    """Reads the command's output; a document of another kind is an error naming it."""
    gpus, slices = [], []
    for doc in yaml.safe_load_all(text):
        if doc is None:
            continue
        kind = doc.get("kind")
        if kind == "PhysicalGPU":
            gpus.append(PhysicalGPU.model_validate(doc))
        elif kind == "ResourceSlice":
            slices.append(V1ResourceSlice.model_validate(doc))
        else:
            raise ValueError(
                f"gpu-handler offers printed a {kind!r} document, expected PhysicalGPU or ResourceSlice"
            )
    return OffersOutput(gpus=tuple(gpus), slices=tuple(slices))


def attribute(device: V1Device, name: str) -> Any:
    """The value of our attribute ``name`` on ``device`` (``None`` when absent)."""
    value: V1DeviceAttribute | None = (device.attributes or {}).get(key(name))
    if value is None:
        return None
    for field in ("string", "int", "bool", "version"):
        if getattr(value, field) is not None:
            return getattr(value, field)
    return None


def slice_rule_violations(slices: Sequence[V1ResourceSlice], *, inline: bool = False) -> list[str]:
    """What the API server (or a scheduler reading the pool) would refuse in ``slices``."""
    problems = []
    for rs in slices:
        try:
            validate_slice(rs, inline=inline)
        except SliceLimitError as exc:
            problems.append(str(exc))
    counters = {
        counter_set.name: {name: parse_quantity(c.value).nanos for name, c in counter_set.counters.items()}
        for rs in slices
        for counter_set in rs.spec.shared_counters or []
    }
    for rs in slices:
        for device in rs.spec.devices or []:
            problems += _consumption_problems(device, counters)
    for pool in {rs.spec.pool.name for rs in slices}:
        members = [rs for rs in slices if rs.spec.pool.name == pool]
        announced = {rs.spec.pool.resource_slice_count for rs in members}
        if announced != {len(members)}:
            problems.append(f"pool {pool}: resourceSliceCount {sorted(announced)} but {len(members)} slices")
    return problems


def _consumption_problems(device: V1Device, counters: dict[str, dict[str, int]]) -> list[str]:
    problems = []
    for use in device.consumes_counters or []:
        held = counters.get(use.counter_set)
        if held is None:
            problems.append(
                f"device {device.name}: consumes from counter set {use.counter_set}, which no slice has"
            )
            continue
        for name, counter in use.counters.items():
            wanted = parse_quantity(counter.value).nanos
            if name not in held:
                problems.append(f"device {device.name}: counter {name} is not in set {use.counter_set}")
            elif wanted > held[name]:
                held_by = f"{use.counter_set}/{name}"
                problems.append(
                    f"device {device.name}: consumes {counter.value} of {held_by}, more than it holds"
                )
    return problems


def fact_mismatches(facts: CardFacts, offers: OffersOutput) -> list[str]:
    """Where the published PhysicalGPU and offers of the card differ from NVML's answers."""
    where = f"card {facts.address}"
    problems = _gpu_mismatches(facts, offers.gpu_at(facts.address))
    exclusive = offers.exclusive_offer(facts.address)
    if exclusive is None:
        return [*problems, f"{where}: no exclusive Physical offer"]
    expected = {
        "uuid": facts.uuid,
        "productName": clip(facts.name),
        "ccMajor": facts.compute_capability[0],
        "ccMinor": facts.compute_capability[1],
    }
    for name, value in expected.items():
        published = attribute(exclusive, name)
        if published != value:
            problems.append(f"{where}: offer {exclusive.name} has {name} {published!r}, NVML says {value!r}")
    problems += _memory_mismatch(where, exclusive, facts.memory_mib)
    return problems + _mig_offer_mismatches(facts, offers.devices_of(facts.address))


def _gpu_mismatches(facts: CardFacts, gpu: PhysicalGPU | None) -> list[str]:
    where = f"card {facts.address}"
    if gpu is None or gpu.status is None:
        return [f"{where}: no PhysicalGPU with a status"]
    status = gpu.status
    capabilities = status.capabilities
    nvidia = status.current_state.nvidia if status.current_state else None
    mig = nvidia.mig if nvidia else None
    published = {
        "productName": capabilities.product_name if capabilities else None,
        "memoryMiB": capabilities.memory_mib if capabilities else None,
        "gpuUUID": nvidia.gpu_uuid if nvidia else None,
        "mig.mode": mig.mode.value if mig and mig.mode else None,
    }
    expected = {
        "productName": facts.name,
        "memoryMiB": facts.memory_mib,
        "gpuUUID": facts.uuid,
        "mig.mode": _MIG_MODES.get(facts.mig_mode) if facts.mig_mode is not None else None,
    }
    return [
        f"{where}: PhysicalGPU {gpu.metadata.name} has {name} {published[name]!r}, NVML says {value!r}"
        for name, value in expected.items()
        if published[name] != value
    ]


def _mig_offer_mismatches(facts: CardFacts, devices: Iterable[V1Device]) -> list[str]:
    where = f"card {facts.address}"
    published: dict[tuple[int, int, int], V1Device] = {}
    for device in devices:
        if attribute(device, "deviceType") == "MIG":
            spot = (
                attribute(device, "profileID"),
                attribute(device, "placementStart"),
                attribute(device, "placementSize"),
            )
            published[spot] = device
    expected: dict[tuple[int, int, int], ProfileFacts] = {
        (p.info.id, start, size): p for p in facts.profiles for start, size in p.placements
    }
    problems = [
        f"{where}: NVML has profile {expected[s].info.name} (ID {s[0]}) at {s[1]}+{s[2]}, no offer has it"
        for s in sorted(expected.keys() - published.keys())
    ]
    problems += [
        f"{where}: offer {published[s].name} (profile {s[0]} at {s[1]}+{s[2]}) is no placement NVML reports"
        for s in sorted(published.keys() - expected.keys())
    ]
    for spot in sorted(expected.keys() & published.keys()):
        profile, device = expected[spot].info, published[spot]
        named = attribute(device, "migProfile")
        if named != profile.name:
            problems.append(f"{where}: offer {device.name} is named {named!r}, NVML says {profile.name!r}")
        problems += _memory_mismatch(where, device, profile.memory_mib)
    return problems


def _memory_mismatch(where: str, device: V1Device, mib: int) -> list[str]:
    memory = (device.capacity or {}).get("memory")
    shown = memory.value if memory is not None else None
    if shown == mib_quantity(mib):
        return []
    return [f"{where}: offer {device.name} has memory {shown!r}, NVML says {mib_quantity(mib)}"]


def mig_table_mismatches(facts: CardFacts, model: ModelFacts) -> list[str]:
    """Where the built-in table of ``model`` differs from the profiles NVML reports."""
    where = f"card {facts.address} ({model.key}, PCI device {model.pci_device_id})"
    reported = {p.info.id: p for p in facts.profiles}
    table = {p.info.id: p for p in model.profiles}
    problems = [
        f"{where}: NVML reports profile {reported[i].info.name} (ID {i}), the table lacks it"
        for i in sorted(reported.keys() - table.keys())
    ]
    problems += [
        f"{where}: the table has profile {table[i].info.name} (ID {i}), NVML does not report it"
        for i in sorted(table.keys() - reported.keys())
    ]
    for profile_id in sorted(reported.keys() & table.keys()):
        nvml, ours = reported[profile_id], table[profile_id]
        if nvml.index != ours.index:
            problems.append(
                f"{where}: profile ID {profile_id} is index {nvml.index} in NVML, {ours.index} in the table"
            )
        for name in (f.name for f in dataclasses.fields(nvml.info)):
            said, kept = getattr(nvml.info, name), getattr(ours.info, name)
            if said != kept:
                problems.append(
                    f"{where}: profile ID {profile_id}: {name} is {said!r} in NVML, {kept!r} in the table"
                )
        if tuple(nvml.placements) != tuple(ours.placements):
            problems.append(
                f"{where}: profile ID {profile_id}: NVML places it at {list(nvml.placements)}, "
                f"the table at {list(ours.placements)}"
            )
    return problems
