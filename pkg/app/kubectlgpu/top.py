"""``kubectl gpu top``: per Pod and container, the GPU memory and utilization gpu-handler last saw.

Computed from claims alone (a namespace user can read them): each of our allocated devices with a
:class:`~api.gpu.v1alpha1.deviceusage.DeviceUsage` in ``status.devices[]`` gives one row per
container listed there; a device without one gives a ``<no sample>`` row, so an allocated device
is never silently missing; a malformed entry gives a ``<malformed>`` row and a problem line naming
the claim and device. The rows are sorted by GPU memory, largest first, unless asked otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from pkg.app.kubectlgpu.claims import Held, held, key
from pkg.app.kubectlgpu.table import Column, Row, age_text, bytes_text, timestamp
from pkg.app.kubectlgpu.usage import DeviceRef, DeviceSample, device_samples

KIND: Final = "GPUUsageList"
COLUMNS: Final = (
    Column("NAMESPACE"),
    Column("POD"),
    Column("CONTAINER"),
    Column("CLAIM"),
    Column("DEVICE"),
    Column("GPU-MEMORY"),
    Column("SM%"),
    Column("AGE-OF-SAMPLE"),
    Column("NODE", wide=True),
    Column("PHYSICALGPU", wide=True),
    Column("UUID", wide=True),
    Column("PROCESSES", wide=True),
)
NO_SAMPLE: Final = "<no sample>"
MALFORMED: Final = "<malformed>"


@dataclass
class _Line:
    row: Row
    memory: int | None
    sm: int | None
    sampled_at: datetime | None


@dataclass(frozen=True)
class TopView:
    rows: list[Row]
    problems: list[str]  # one sentence per malformed entry


SORT_KEYS: Final[dict[str, Callable[[_Line], Any]]] = {
    # Missing values sort last whatever the key: a device with no sample is not the biggest user.
    "memory": lambda line: (line.memory is None, -(line.memory or 0)),
    "sm": lambda line: (line.sm is None, -(line.sm or 0)),
    "age": lambda line: (line.sampled_at is None, -(line.sampled_at.timestamp() if line.sampled_at else 0)),
    "namespace": lambda line: line.row.cells["NAMESPACE"],
    "pod": lambda line: line.row.cells["POD"],
    "claim": lambda line: line.row.cells["CLAIM"],
}


def top_view(claims: Sequence[dict[str, Any]], *, now: datetime, sort_by: str = "memory") -> TopView:
    lines: list[_Line] = []
    problems: list[str] = []
    for claim in claims:
        namespace, name = key(claim)
        samples = {(s.ref.pool, s.ref.device, s.ref.share_id): s for s in device_samples(claim)}
        devices = held(claim)
        for device in devices:
            sample = samples.pop((device.pool, device.device, device.share_id), None)
            lines.extend(_device_lines(device, sample, now, problems))
        for sample in samples.values():  # status entries for devices the allocation no longer names
            orphan = Held(
                namespace, name, "", sample.ref.pool, sample.ref.device, sample.ref.share_id, "", ()
            )
            lines.extend(_device_lines(orphan, sample, now, problems))
    lines.sort(key=lambda line: line.row.cells["NAMESPACE"] + "/" + line.row.cells["CLAIM"])
    lines.sort(key=SORT_KEYS[sort_by])
    return TopView(rows=[line.row for line in lines], problems=problems)


def _device_lines(
    device: Held, sample: DeviceSample | None, now: datetime, problems: list[str]
) -> list[_Line]:
    base = {
        "NAMESPACE": device.namespace,
        "POD": ",".join(device.pods) or "<none>",
        "CONTAINER": "",
        "CLAIM": device.claim,
        "DEVICE": _device_text(
            sample.ref if sample else DeviceRef(device.pool, device.device, device.share_id)
        ),
        "SM%": "-",
        "AGE-OF-SAMPLE": "-",
        "NODE": device.node,
    }
    item: dict[str, Any] = {
        "namespace": device.namespace,
        "claim": device.claim,
        "pool": device.pool,
        "device": device.device,
        "shareID": device.share_id,
        "node": device.node,
    }
    if sample is None or (sample.usage is None and sample.problem is None):
        row = Row({**base, "GPU-MEMORY": NO_SAMPLE}, {**item, "pods": list(device.pods), "sample": None})
        return [_Line(row, None, None, None)]
    if sample.usage is None:
        problems.append(f"claim {device.namespace}/{device.claim} device {base['DEVICE']}: {sample.problem}")
        row = Row({**base, "GPU-MEMORY": MALFORMED}, {**item, "problem": sample.problem})
        return [_Line(row, None, None, None)]
    usage = sample.usage
    sampled_at = _aware(usage.sampled_at)
    age = age_text(now - sampled_at)
    shared = {
        **base,
        "AGE-OF-SAMPLE": age,
        "PHYSICALGPU": usage.physical_gpu,
        "UUID": usage.uuid,
    }
    item |= {"physicalGPU": usage.physical_gpu, "uuid": usage.uuid, "sampledAt": timestamp(sampled_at)}
    lines = []
    for c in usage.containers:
        cells = {
            **shared,
            "NAMESPACE": c.namespace,
            "POD": c.pod,
            "CONTAINER": c.container or "<unknown>",
            "GPU-MEMORY": bytes_text(c.memory_bytes),
            "SM%": "-" if c.sm_utilization_percent is None else str(c.sm_utilization_percent),
            "PROCESSES": str(c.processes),
        }
        container = {
            "pod": c.pod,
            "container": c.container,
            "processes": c.processes,
            "memoryBytes": c.memory_bytes,
            "smUtilizationPercent": c.sm_utilization_percent,
        }
        row = Row(cells, {**item, "namespace": c.namespace, **container})
        lines.append(_Line(row, c.memory_bytes, c.sm_utilization_percent, sampled_at))
    if usage.containers_omitted:
        rest = max(0, usage.memory_used_bytes - sum(c.memory_bytes for c in usage.containers))
        cells = {**shared, "CONTAINER": f"<{usage.containers_omitted} more>", "GPU-MEMORY": bytes_text(rest)}
        row = Row(cells, {**item, "containersOmitted": usage.containers_omitted, "memoryBytes": rest})
        lines.append(_Line(row, rest, None, sampled_at))
    if not lines:  # sampled, and nothing of the claim's runs on the device
        cells = {**shared, "CONTAINER": "<idle>", "GPU-MEMORY": bytes_text(usage.memory_used_bytes)}
        row = Row(cells, {**item, "pods": list(device.pods), "memoryBytes": usage.memory_used_bytes})
        lines.append(_Line(row, usage.memory_used_bytes, usage.sm_utilization_percent, sampled_at))
    return lines


def _device_text(ref: DeviceRef) -> str:
    return f"{ref.device}#{ref.share_id[:8]}" if ref.share_id else ref.device


def _aware(moment: datetime) -> datetime:
    """A timestamp without a zone is read as UTC (what the API's timestamps are)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
