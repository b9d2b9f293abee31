"""Leader election against the real API server: in-process managers, then gpu-controller processes.

The unit tests drive the elector with a fake clock and a fake lease client; these prove what only a
real API server can: that optimistic concurrency on the Lease lets exactly one candidate lead, that a
clean stop hands the lease back so the successor starts at once, and that after a crash (SIGKILL, no
release possible) the survivor waits for the old lease to expire and then takes over.

Timing bounds are derived from the elector's contract, not tuned: a candidate polls every
``retry_period * (1 + random() * JITTER_FACTOR)``, judges expiry by when *it* last saw the lease
change, so after a crash takeover comes between one lease duration after the last renewal and one
lease duration plus two polling intervals after the kill (one interval to notice the last renewal,
one to notice the expiry).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from kubernetes.client import V1Lease
from testutil.integration.process_helpers import eventually, running

from pkg.devcluster.processes import free_port
from pkg.framework.client import KubeClient, NotFoundError, WatchEventType
from pkg.framework.client.builtin_kinds import LEASE
from pkg.framework.client.config import new_api_client
from pkg.framework.manager.leaderelection import JITTER_FACTOR, LeaderElectionConfig
from pkg.framework.manager.manager import Manager

logger = logging.getLogger(__name__)  # measured timings, for spotting drift towards the bounds

# -- in process -----------------------------------------------------------------------------------

LEASE_DURATION = 4.0
RENEW_DEADLINE = 3.0
RETRY_PERIOD = 0.5


class _LeaderOnlyWork:
    """A leader-only runnable that records when (and whether) it started."""

    needs_leader_election = True

    def __init__(self, name: str):
        self.name = name
        self.started = threading.Event()
        self.started_at: float | None = None

    def run(self, stop: threading.Event) -> None:
        self.started_at = time.monotonic()
        self.started.set()
        stop.wait()


@dataclass
class _Candidate:
    """One manager competing for the lease, run on its own thread until :meth:`stop`."""

    identity: str
    manager: Manager
    work: _LeaderOnlyWork
    stopping: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"manager-{self.identity}", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stops the manager cleanly and re-raises whatever its ``run`` raised."""
        self.stopping.set()
        assert self.thread is not None
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"manager {self.identity} did not stop within {timeout}s"
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            self.manager.run(self.stopping)
        except BaseException as exc:
            self.error = exc


def _leads(manager: Manager, lease_name: str) -> bool:
    """Whether ``manager`` holds ``lease_name``, as its leader-election gauge says."""
    gauge = manager.metrics.full_name("leader_election_master_status")
    return manager.metrics.registry.get_sample_value(gauge, {"name": lease_name}) == 1


def _candidate(kube: KubeClient, *, identity: str, lease_name: str, namespace: str) -> _Candidate:
    config = LeaderElectionConfig(
        lease_name=lease_name,
        lease_namespace=namespace,
        identity=identity,
        lease_duration=LEASE_DURATION,
        renew_deadline=RENEW_DEADLINE,
        retry_period=RETRY_PERIOD,
    )
    # Lease requests must time out well within the renew deadline (see leaderelection's docstring).
    lease_client = KubeClient(kube.api_client, field_manager=f"le-test-{identity}", request_timeout=3)
    manager = Manager(leader_election=config, lease_client=lease_client, shutdown_timeout=10)
    work = _LeaderOnlyWork(f"work-{identity}")
    manager.add(work)
    return _Candidate(identity=identity, manager=manager, work=work)


@dataclass(frozen=True)
class _Seen:
    at: float  # monotonic time the watch delivered the event
    holder: str | None
    transitions: int


class _LeaseHistory:
    """Every version of one Lease the API server stores, in order, from a watch on its own client.

    Polling could miss the released version (the successor overwrites it within a poll interval);
    a watch delivers each write.
    """

    def __init__(self, kubeconfig: str, *, name: str, namespace: str):
        self._client = KubeClient(new_api_client(kubeconfig), field_manager="le-test-watch")
        self._name, self._namespace = name, namespace
        self._seen: list[_Seen] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        _, self._resource_version = self._client.list(
            LEASE, namespace=namespace, field_selector=f"metadata.name={name}"
        )
        self._thread = threading.Thread(target=self._watch, name="lease-watch", daemon=True)
        self._thread.start()

    def snapshot(self) -> list[_Seen]:
        with self._lock:
            return list(self._seen)

    def close(self) -> None:
        """Ends the watch at the lease's next write (a renewal, or the release on a clean stop); the
        thread is a daemon, so if none comes it ends with the watch's server-side timeout."""
        self._done.set()

    def _watch(self) -> None:
        events = self._client.watch(
            LEASE,
            resource_version=self._resource_version,
            namespace=self._namespace,
            field_selector=f"metadata.name={self._name}",
            timeout_seconds=60,
        )
        for event in events:
            if self._done.is_set():
                break
            if event.type == WatchEventType.BOOKMARK:
                continue
            spec = event.raw.get("spec") or {}
            seen = _Seen(time.monotonic(), spec.get("holderIdentity"), spec.get("leaseTransitions") or 0)
            with self._lock:
                self._seen.append(seen)


def _lease(kube: KubeClient, name: str, namespace: str) -> V1Lease | None:
    try:
        return kube.get(LEASE, name, namespace)
    except NotFoundError:
        return None


def _holder(kube: KubeClient, name: str, namespace: str) -> str:
    lease = _lease(kube, name, namespace)
    return (lease.spec.holder_identity or "") if lease and lease.spec else ""


def test_one_manager_leads_and_a_clean_stop_hands_over_at_once(
    kube: KubeClient, kubeconfig: str, namespace: str, unique: str
) -> None:
    lease_name = f"le-{unique}"
    history = _LeaseHistory(kubeconfig, name=lease_name, namespace=namespace)
    candidates = {
        c.identity: c
        for c in (
            _candidate(kube, identity=f"a-{unique}", lease_name=lease_name, namespace=namespace),
            _candidate(kube, identity=f"b-{unique}", lease_name=lease_name, namespace=namespace),
        )
    }
    for candidate in candidates.values():  # started together: they race to create the lease
        candidate.start()
    try:
        leader_id = eventually(
            lambda: _holder(kube, lease_name, namespace), timeout=10, what="a holder of the lease"
        )
        leader = candidates[leader_id]
        (follower,) = (c for c in candidates.values() if c is not leader)
        assert leader.work.started.wait(5), "the holder's leader-only runnable never started"

        # Longer than a lease duration: only renewals keep the follower from taking an expired lease.
        time.sleep(LEASE_DURATION + 2 * RETRY_PERIOD)
        lease = kube.get(LEASE, lease_name, namespace)
        assert lease.spec is not None
        assert lease.spec.holder_identity == leader_id
        assert lease.spec.lease_transitions == 0
        assert _leads(leader.manager, lease_name)
        assert not _leads(follower.manager, lease_name)
        assert not follower.work.started.is_set(), "the follower ran leader-only work"
        renewals = [s for s in history.snapshot() if s.holder == leader_id]
        assert len(renewals) >= LEASE_DURATION / (RETRY_PERIOD * (1 + JITTER_FACTOR)), renewals

        stopped_at = time.monotonic()
        leader.stop()
        assert follower.work.started.wait(LEASE_DURATION), "the follower did not take over"
        assert follower.work.started_at is not None
        takeover = follower.work.started_at - stopped_at
        logger.info("clean stop: follower took over after %.3fs", takeover)
        assert takeover < LEASE_DURATION, f"takeover took {takeover:.2f}s"

        def release_and_takeover() -> list[_Seen] | None:
            after = [s for s in history.snapshot() if s.at >= stopped_at and s.holder != leader_id]
            return after[:2] if len(after) >= 2 else None

        released, taken = eventually(
            release_and_takeover, timeout=5, what="the release and the takeover in the lease's history"
        )
        assert released.holder is None, f"the lease went from {leader_id} to {released.holder} unreleased"
        release_delay = released.at - stopped_at
        logger.info("clean stop: lease released after %.3fs", release_delay)
        assert release_delay < 2 * RETRY_PERIOD, f"release took {release_delay:.2f}s"
        assert not _leads(leader.manager, lease_name)
        assert taken.holder == follower.identity
        assert taken.transitions == 1
        assert _leads(follower.manager, lease_name)
        history.close()
        follower.stop()  # its release ends the watch
    finally:
        history.close()
        for candidate in candidates.values():  # cleanup only: the body checked the stops it made
            with contextlib.suppress(Exception):
                candidate.stop()


# -- processes ------------------------------------------------------------------------------------

DEFAULTS = LeaderElectionConfig(lease_name="defaults", lease_namespace="defaults")
"""The timings gpu-controller runs with: it does not override the config's defaults."""

POLL_INTERVAL_MAX = DEFAULTS.retry_period * (1 + JITTER_FACTOR)
CRASH_TAKEOVER_BOUND = DEFAULTS.lease_duration + 2 * POLL_INTERVAL_MAX + 1.0  # + 1 s for requests


@dataclass
class _Process:
    proc: subprocess.Popen[bytes]
    log_path: Path
    port: int

    def identity(self) -> str | None:
        """The elector's identity, from its "attempting to acquire" log line (JSON lines)."""
        if not self.log_path.exists():
            return None
        for line in self.log_path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if entry.get("msg") == "attempting to acquire the lease":
                    return str(entry["identity"])
        return None

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())


@pytest.fixture
def two_controllers(
    kubeconfig: str, namespace: str, unique: str, tmp_path: Path
) -> Iterator[tuple[str, list[_Process]]]:
    lease_name = f"gpu-controller-{unique}"
    with contextlib.ExitStack() as stack:
        processes = []
        for index in range(2):
            port = free_port()
            log_path = tmp_path / f"gpu-controller-{index}.log"
            args = [
                f"--kubeconfig={kubeconfig}",
                f"--metrics-bind-address=127.0.0.1:{port}",
                f"--leader-election-namespace={namespace}",
                f"--leader-election-id={lease_name}",
            ]
            proc = stack.enter_context(running("pkg.app.gpu_controller", args, log_path=log_path))
            processes.append(_Process(proc=proc, log_path=log_path, port=port))
        yield lease_name, processes


def test_survivor_takes_over_after_the_leader_is_killed(
    kube: KubeClient,
    namespace: str,
    two_controllers: tuple[str, list[_Process]],
) -> None:
    lease_name, processes = two_controllers

    def both_identities() -> list[str] | None:
        found = [p.identity() for p in processes]
        return [i for i in found if i] if all(found) else None

    identities = eventually(
        both_identities,
        timeout=20,
        what="both controllers to start competing for the lease",
    )
    assert len(set(identities)) == 2
    holder = eventually(lambda: _holder(kube, lease_name, namespace), timeout=20, what="a lease holder")
    assert holder in identities
    leader = processes[identities.index(holder)]
    (survivor,) = (p for p in processes if p is not leader)
    status_line = f'gpu_leader_election_master_status{{name="{lease_name}"}} 1.0'
    eventually(lambda: status_line in leader.metrics(), timeout=10, what="the leader's master status 1")
    assert status_line not in survivor.metrics()

    leader.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    leader.proc.wait(timeout=5)
    old = kube.get(LEASE, lease_name, namespace).spec  # the dead leader's last renewal
    assert old is not None
    assert old.holder_identity == holder
    assert old.renew_time is not None
    assert old.lease_duration_seconds == DEFAULTS.lease_duration

    def taken_over() -> V1Lease | None:
        lease = kube.get(LEASE, lease_name, namespace)
        return lease if lease.spec and lease.spec.holder_identity not in (holder, None) else None

    new = eventually(taken_over, timeout=CRASH_TAKEOVER_BOUND + 5, what="the survivor to take over").spec
    takeover = time.monotonic() - killed_at
    logger.info("SIGKILL: survivor took over after %.3fs (bound %.1fs)", takeover, CRASH_TAKEOVER_BOUND)
    assert new is not None
    assert new.holder_identity == survivor.identity()
    assert takeover < CRASH_TAKEOVER_BOUND, f"takeover took {takeover:.1f}s after the kill"
    # Not before the old lease expired: the survivor waited a full duration after the last renewal.
    assert new.acquire_time is not None
    expired_at = old.renew_time + timedelta(seconds=old.lease_duration_seconds)
    assert new.acquire_time >= expired_at, (new.acquire_time, expired_at)
    assert new.lease_transitions == (old.lease_transitions or 0) + 1
    eventually(lambda: status_line in survivor.metrics(), timeout=5, what="the survivor's master status 1")
