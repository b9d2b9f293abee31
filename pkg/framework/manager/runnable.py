"""Something the manager runs for the life of the process.

``run`` blocks until ``stop`` is set and then returns promptly; it raises only for a fatal error,
which makes the manager stop everything (a crashed component must not limp on silently).
Runnables with ``needs_leader_election = True`` start only while this process holds the lease.
"""

from __future__ import annotations

import threading
from typing import Protocol


class Runnable(Protocol):
    name: str
    needs_leader_election: bool

    def run(self, stop: threading.Event) -> None: ...
