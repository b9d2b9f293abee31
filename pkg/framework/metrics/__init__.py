"""Metrics of the framework, created through a :class:`MetricsProvider` the process hands in."""

from pkg.framework.metrics.provider import MetricsProvider

__all__ = ["MetricsProvider"]
