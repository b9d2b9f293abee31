"""The metrics provider: one registry and one name prefix, handed in by the process that runs us.

The framework defines its own metric families (workqueue, reconcile, leader election) but not
where they are registered nor how their names start: a process builds one
:class:`MetricsProvider` (``pkg.app`` builds the project's, namespace ``gpu``) and hands it to the
manager, the controllers and the queues. So the framework has no module-level metric globals, and
two processes, or two tests, never fight over one registry.

A provider memoises the families it creates by name: asking twice for ``workqueue_depth`` returns
the same :class:`~prometheus_client.Gauge`, so building many queues or controllers (every unit test
does) never registers a family twice, and two queues of the same name share their series, as they
would in client-go. The lock makes that safe from any thread.

A framework object built without a provider gets a private one (:func:`MetricsProvider` with its
own registry and no prefix): it still counts, but nothing exposes it. Production wiring always
passes the process's provider; the controller builder takes it from the manager.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.registry import Collector

_FamilyT = TypeVar("_FamilyT", Counter, Gauge, Histogram)


class MetricsProvider:
    """Creates (once) and hands out metric families in one registry, names prefixed by ``namespace``."""

    def __init__(self, *, registry: CollectorRegistry | None = None, namespace: str = "") -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.namespace = namespace
        self._families: dict[str, Counter | Gauge | Histogram] = {}
        self._lock = threading.Lock()

    def full_name(self, name: str) -> str:
        """``name`` as exposed: ``workqueue_depth`` -> ``<namespace>_workqueue_depth``."""
        return f"{self.namespace}_{name}" if self.namespace else name

    def counter(self, name: str, documentation: str, *, labelnames: Sequence[str] = ()) -> Counter:
        return self._family(Counter, name, documentation, labelnames)

    def gauge(self, name: str, documentation: str, *, labelnames: Sequence[str] = ()) -> Gauge:
        return self._family(Gauge, name, documentation, labelnames)

    def histogram(
        self,
        name: str,
        documentation: str,
        *,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS,
    ) -> Histogram:
        return self._family(Histogram, name, documentation, labelnames, buckets=tuple(buckets))

    def register(self, collector: Collector) -> None:
        """Registers a custom collector (one that computes its series at scrape time)."""
        self.registry.register(collector)

    def _family(
        self,
        cls: type[_FamilyT],
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        **kwargs: tuple[float, ...],
    ) -> _FamilyT:
        with self._lock:
            known = self._families.get(name)
            if known is None:
                known = cls(
                    name,
                    documentation,
                    labelnames=list(labelnames),
                    namespace=self.namespace,
                    registry=self.registry,
                    **kwargs,  # type: ignore[arg-type]
                )
                self._families[name] = known
            if not isinstance(known, cls):
                raise TypeError(f"metric {name!r} is a {type(known).__name__}, not a {cls.__name__}")
            return known


__all__ = ["MetricsProvider"]
