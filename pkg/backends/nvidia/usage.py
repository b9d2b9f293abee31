"""One NVML pass over a card's processes: memory, SM share, energy (:class:`~pkg.backends.usage.CardUsage`).

Per-process utilization comes from the driver's sample buffer (``nvmlDeviceGetProcessUtilization``),
read from the newest timestamp seen on the previous pass, so each pass sees each sample once;
the several samples of one PID in a pass are averaged. NVML has no such samples for a card in MIG
mode (``NOT_SUPPORTED``): there the SM share is ``None``. A process in a MIG device is reported
with the MIG device's UUID, read once per (GPU instance, compute instance) per pass.
"""

from __future__ import annotations

import threading
from collections import defaultdict

from pkg.backends.errors import BackendError
from pkg.backends.nvidia.nvml_port import NO_INSTANCE, Nvml, NvmlError, if_offered
from pkg.backends.usage import CardUsage, ProcessUsage


class UsageReader:
    """Reads :class:`CardUsage` through ``nvml``; remembers per card where its samples ended."""

    def __init__(self, nvml: Nvml) -> None:
        self._nvml = nvml
        self._lock = threading.Lock()
        self._since: dict[str, int] = {}

    def read(self, address: str) -> CardUsage:
        """Raises :class:`BackendError` when the card cannot be read at all."""
        nvml = self._nvml
        try:
            card_uuid = nvml.uuid(address)
            processes = nvml.processes(address)
            sm = self._sm_percent(address)
            energy = if_offered(lambda: nvml.total_energy_mj(address))
            mig_uuids = {
                pair: nvml.mig_device_uuid(address, *pair)
                for pair in {(p.gpu_instance, p.compute_instance) for p in processes}
                if pair[0] != NO_INSTANCE
            }
        except NvmlError as exc:
            raise BackendError(address=address, reason=exc.reason, message=str(exc)) from exc
        return CardUsage(
            address=address,
            uuid=card_uuid,
            energy_mj=energy,
            processes=tuple(
                ProcessUsage(
                    pid=p.pid,
                    device_uuid=mig_uuids.get((p.gpu_instance, p.compute_instance), card_uuid),
                    memory_bytes=p.used_memory_bytes,
                    sm_percent=None if sm is None else sm.get(p.pid, 0),
                )
                for p in processes
            ),
        )

    def _sm_percent(self, address: str) -> dict[int, int] | None:
        """Mean SM percent per PID over the samples since the last pass; ``None``: not offered."""
        with self._lock:
            since = self._since.get(address, 0)
        samples = if_offered(lambda: self._nvml.process_utilization(address, since))
        if samples is None:
            return None
        per_pid: dict[int, list[int]] = defaultdict(list)
        for sample in samples:
            per_pid[sample.pid].append(sample.sm_percent)
        if samples:
            with self._lock:
                self._since[address] = max(since, *(s.timestamp_us for s in samples))
        return {pid: round(sum(values) / len(values)) for pid, values in per_pid.items()}
