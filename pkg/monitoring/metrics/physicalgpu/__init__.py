"""Inventory metrics of PhysicalGPUs, read from the informer cache (spec §11.4: no API calls)."""

from pkg.monitoring.metrics.physicalgpu.collector import PhysicalGPUCollector

__all__ = ["PhysicalGPUCollector"]
