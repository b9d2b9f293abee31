"""Leader-election metrics.

``<ns>_leader_election_master_status{name}`` mirrors client-go's ``leader_election_master_status``:
1 while this process holds the lease named ``name``, 0 otherwise, so an alert can check that exactly
one replica leads. The transitions counter counts how often *this process* gained or lost the lease;
a steadily growing value means replicas keep stealing the lease (clock or network trouble).
"""

from __future__ import annotations

from pkg.framework.metrics.provider import MetricsProvider


class LeaderMetrics:
    """The leader-election families of one process."""

    def __init__(self, *, provider: MetricsProvider) -> None:
        self.master_status = provider.gauge(
            "leader_election_master_status",
            "1 while this process holds the leader-election lease, 0 otherwise.",
            labelnames=("name",),
        )
        self.transitions = provider.counter(
            "leader_election_transitions",
            "Times this process started or stopped leading, by lease name and direction.",
            labelnames=("name", "direction"),
        )

    def set_leading(self, name: str, *, leading: bool) -> None:
        """Records that this process started (``leading=True``) or stopped leading the lease ``name``."""
        self.master_status.labels(name=name).set(1 if leading else 0)
        self.transitions.labels(name=name, direction="started" if leading else "stopped").inc()


__all__ = ["LeaderMetrics"]
