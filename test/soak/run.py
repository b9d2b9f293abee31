"""The soak's loop: the workload's churn, the invariants every few seconds, the fault schedule, and
the recovery after each strike; then the report (docs/reliability.md).

One thread does everything in turn (the supervisor's own thread aside), so what the report says
happened in an order did happen in that order. The soak's clock is the wall clock, as the API
server's timestamps are. A strike waits for its planned time *and* for the previous strike's
recovery (or its bound) plus a short quiet time, so two faults never overlap.

Recovery, measured per strike from the heal (the strike, for an instant fault): every supervised
component is running, every live workload Pod older than a normal start is Running (or done), and
no host object has been without an owning claim for longer than a normal Prepare takes.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes.client import V1Namespace, V1ObjectMeta

from pkg.framework.client.builtin_kinds import NAMESPACE
from soak import invariants
from soak.casualties import casualty_of
from soak.cluster import SoakCluster, soak_cluster
from soak.faults import FaultKind, all_kinds, durations
from soak.host_state import HostObject, NodePaths, read_node
from soak.report import ComponentFigures, Finding, PodFigures, SoakResult, StrikeResult, render, write
from soak.schedule import Strike, long_plan, smoke_plan
from soak.workload import COMPLETED, LOST, Workload, lifetimes
from soak.workload import plan as plan_slots

WORKLOAD_NAMESPACE = "soak"
VFIO_NODES = ("soak-ws",)  # bare-metal VM hosts: their cards go to VM Pods through VFIO


@dataclass(frozen=True)
class Settings:
    seconds: float  # the run after the warm-up
    rate: float  # Pods per minute
    smoke: bool = False
    rounds: int | None = None  # None: as many as fit (at least 2: each fault more than once)
    bound: float = 120.0  # recovery bound, seconds
    warmup: float = 90.0
    quiet_gap: float = 60.0  # least quiet time after each fault in the long run's plan
    settle: float = 10.0  # quiet after a recovery before the next strike
    start_grace: float = 20.0  # a Pod younger than this may still be starting; a Prepare in flight
    check_every: float = 5.0
    memory_every: float = 30.0
    memory_tolerance: float = 0.3
    restart_window: float = 600.0
    restart_threshold: int = 3
    seed: int = 0


@dataclass
class _Active:
    """The strike under way: struck, then (durational) healed, then recovered or out of bound."""

    planned: Strike
    fault: FaultKind
    target: str
    struck_at: float
    healed_at: float | None = None
    error: str | None = None


@dataclass
class _Snapshot:
    claims: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    host: list[HostObject]


@dataclass
class Soak:
    cluster: SoakCluster
    settings: Settings
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.time
    findings: list[Finding] = field(default_factory=list)
    strikes: list[StrikeResult] = field(default_factory=list)
    _seen_findings: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)
    _seen_allocations: set[str] = field(default_factory=set)
    _last_slices: list[invariants.Json] | None = None  # each pool as last seen complete (remembered_slices)
    _unowned_since: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    _baseline: frozenset[tuple[str, str, str]] = frozenset()
    _memory: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    _windows: list[tuple[float, float]] = field(default_factory=list)  # strike .. heal + bound
    _open_since: float | None = None  # the strike under way, if any
    _begun: float = 0.0

    def run(self) -> SoakResult:
        started = self.clock()
        self._begun = started
        kube = self.cluster.kube
        kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=WORKLOAD_NAMESPACE)))
        first = self._snapshot()
        assert first is not None, "the API server does not answer at the start"
        self._baseline = frozenset(o.key for o in first.host)
        slots = plan_slots(first.slices, vfio_nodes=VFIO_NODES)
        shortest, longest = lifetimes(sum(s.units for s in slots), self.settings.rate)
        workload = Workload(
            kube,
            WORKLOAD_NAMESPACE,
            slots,
            rate=self.settings.rate,
            bound=self.settings.bound,
            rng=random.Random(self.settings.seed),
            lifetime=(shortest, longest),
        )
        caps = ", ".join(f"{kind.value} {n}" for kind, n in workload.caps.items())
        self.say(
            f"workload: {len(slots)} cards; Pods at once per kind: {caps}; "
            f"each lives {shortest:.0f}-{longest:.0f}s"
        )
        faults = all_kinds(self.cluster)
        schedule = self._schedule()
        self.say(
            f"schedule: {len(schedule)} strikes of {len(faults)} fault kinds "
            f"after {self.settings.warmup:.0f}s of warm-up"
        )
        self._loop(workload, until=started + self.settings.warmup, faults=faults, schedule=[], memory=False)
        rss_start = self._rss()
        self._loop(workload, until=None, faults=faults, schedule=schedule, origin=self.clock())
        self._drain(workload)
        self._final_checks()
        return SoakResult(
            started=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            seconds=self.clock() - started,
            rate=self.settings.rate,
            smoke=self.settings.smoke,
            strikes=self.strikes,
            pods=_pod_figures(workload, self.strikes, begun=self._begun, bound=self.settings.bound),
            components=self._components(rss_start, self._rss()),
            findings=self.findings,
        )

    # -- the loop --------------------------------------------------------------------------------

    def _schedule(self) -> list[Strike]:
        kinds = durations()
        if self.settings.smoke:
            return smoke_plan(kinds, quiet_gap=self.settings.settle)
        return long_plan(
            kinds,
            seconds=self.settings.seconds,
            rounds=self.settings.rounds,
            quiet_gap=self.settings.quiet_gap,
            least_gap=self.settings.settle,
            seed=self.settings.seed,
        )

    def _loop(
        self,
        workload: Workload,
        *,
        until: float | None,
        faults: Mapping[str, FaultKind],
        schedule: Sequence[Strike],
        origin: float = 0.0,
        memory: bool = True,
    ) -> None:
        """Steps the workload and checks the invariants until ``until`` or, with a schedule, until
        its last strike has recovered. ``memory``: sample the components' memory (not during the
        warm-up, while their caches fill: that growth is not a leak)."""
        pending = list(schedule)
        active: _Active | None = None
        calm_since = self._begun
        ready_at = origin  # no strike before the previous one recovered and settled
        next_check = next_memory = 0.0
        while True:
            now = self.clock()
            if until is not None and now >= until:
                return
            if until is None and not pending and active is None:
                return
            if active is None and pending and now >= max(origin + pending[0].at, ready_at):
                planned = pending.pop(0)
                active = self._strike(faults[planned.kind], planned)
                now = self.clock()
            if (
                active is not None
                and active.healed_at is None
                and now >= active.struck_at + active.fault.duration
            ):
                self._heal(active)
                now = self.clock()
            calm_since = now if active is not None and active.healed_at is None else calm_since
            if active is not None and active.healed_at is not None:
                calm_since = active.healed_at
            try:
                for line in workload.step(now, calm_since=calm_since):
                    if line.startswith("lost"):
                        self.say(f"  {line}")
            except Exception as exc:  # the API server may be down: a fault, not the soak's end
                self.say(f"  workload step failed: {exc}")
            if now >= next_check:
                next_check = now + self.settings.check_every
                snapshot = self._snapshot()
                if snapshot is not None:
                    self._check(snapshot, now=now, calm_since=calm_since, quiet=active is None)
                    healed = active.healed_at if active is not None else None
                    if active is not None and healed is not None:
                        recovered = self._recovered(snapshot, workload, now)
                        if recovered or now - healed > self.settings.bound:
                            self._close(active, recovery=now - healed if recovered else None)
                            ready_at = now + self.settings.settle
                            active = None
            if memory and now >= next_memory:
                next_memory = now + self.settings.memory_every
                self._sample_memory(now)
            self._lost_pods(workload)
            time.sleep(1.0)

    def _strike(self, fault: FaultKind, planned: Strike) -> _Active:
        at = self.clock()
        self._open_since = at
        self.say(f"[{at - self._begun:6.0f}s] strike {fault.name}")
        active = _Active(planned=planned, fault=fault, target="?", struck_at=at)
        try:
            active.target = fault.strike()
            self.say(f"         {fault.name} hit {active.target}")
        except Exception as exc:
            active.error = f"{type(exc).__name__}: {exc}"
            self.say(f"         {fault.name} failed: {active.error}")
        if active.error is not None or fault.duration == 0:
            active.healed_at = at  # an instant fault's recovery counts from its strike
        return active

    def _heal(self, active: _Active) -> None:
        try:
            active.fault.heal()
        except Exception as exc:
            active.error = f"heal: {type(exc).__name__}: {exc}"
            self.say(f"         {active.fault.name} heal failed: {active.error}")
        active.healed_at = self.clock()
        self.say(f"[{active.healed_at - self._begun:6.0f}s] healed {active.fault.name}")

    def _close(self, active: _Active, *, recovery: float | None) -> None:
        healed = active.healed_at if active.healed_at is not None else active.struck_at
        self._windows.append((active.struck_at, healed + self.settings.bound))
        self._open_since = None
        shown = "not within the bound" if recovery is None else f"in {recovery:.1f}s"
        self.say(f"         recovered from {active.fault.name} {shown}")
        self.strikes.append(
            StrikeResult(
                kind=active.fault.name,
                target=active.target,
                struck_at=active.struck_at - self._begun,
                healed_at=healed - self._begun,
                recovery=None if active.error else recovery,
                error=active.error,
            )
        )

    # -- observing -------------------------------------------------------------------------------

    def _json_items(self, *args: str) -> list[dict[str, Any]] | None:
        out = self.cluster.plane.kubectl("get", *args, "-o", "json", check=False)
        if not out:
            return None
        try:
            items: list[dict[str, Any]] = json.loads(out).get("items", [])
        except ValueError:
            return None
        return items

    def _snapshot(self) -> _Snapshot | None:
        """The API server's objects and every node's host objects; None while the API is down."""
        claims = self._json_items("resourceclaims", "-A")
        slices = self._json_items("resourceslices")
        pods = self._json_items("pods", "-n", WORKLOAD_NAMESPACE)
        if claims is None or slices is None or pods is None:
            return None
        host = [obj for node in self.cluster.nodes for obj in read_node(NodePaths.of(node.components))]
        return _Snapshot(claims, slices, pods, host)

    def _check(self, snap: _Snapshot, *, now: float, calm_since: float, quiet: bool) -> None:
        found = invariants.double_allocations(snap.claims, snap.slices, now=now, before=self._last_slices)
        fresh = invariants.newly_allocated(snap.claims, self._seen_allocations)
        found += invariants.bad_allocations(fresh, snap.slices, now=now, before=self._last_slices)
        self._last_slices = invariants.remembered_slices(self._last_slices or [], snap.slices)
        self._seen_allocations |= {k for c in fresh if (k := invariants.allocation_key(c)) is not None}
        leaks = invariants.leaks(
            snap.host,
            snap.claims,
            slices=snap.slices,
            now=now,
            grace=self.settings.bound,
            unowned_since=self._unowned_since,
            baseline=self._baseline,
        )
        self._unowned_since = leaks.unowned_since
        found += leaks.violations
        if quiet:
            found += invariants.unrecovered(snap.pods, now, self.settings.bound, healed_at=calm_since)
        found += invariants.restart_loops(
            self._own_restarts(),
            now=now,
            window=self.settings.restart_window,
            threshold=self.settings.restart_threshold,
        )
        for violation in found:
            self._find(violation.kind, violation.message, violation.at, violation.objects)

    def _recovered(self, snap: _Snapshot, workload: Workload, now: float) -> bool:
        supervisor = self.cluster.supervisor
        if any(supervisor.rss_bytes(name) is None for name in self.cluster.component_names):
            return False
        live = {r.name for r in workload.records.values() if r.live and r.outcome is None}
        for pod in snap.pods:
            meta, status = pod.get("metadata") or {}, pod.get("status") or {}
            if meta.get("name") not in live or status.get("phase") in ("Running", "Succeeded"):
                continue
            created = _epoch(meta.get("creationTimestamp"))
            if created is None or now - created > self.settings.start_grace:
                return False
        return not any(now - since > self.settings.start_grace for since in self._unowned_since.values())

    def _own_restarts(self) -> dict[str, list[float]]:
        supervisor = self.cluster.supervisor
        return {
            name: [r.exited_at for r in supervisor.restarts(name) if not r.ours]
            for name in self.cluster.component_names
        }

    def _sample_memory(self, now: float) -> None:
        for name, rss in self._rss().items():
            if rss is not None:
                self._memory.setdefault(name, []).append((now, rss))

    def _rss(self) -> dict[str, int | None]:
        return {name: self.cluster.supervisor.rss_bytes(name) for name in self.cluster.component_names}

    def _lost_pods(self, workload: Workload) -> None:
        """A Pod lost outside every fault's window (strike until its heal plus the bound) is a
        finding: nothing excuses it. One lost while a fault is under way is counted, not found."""
        for record in workload.records.values():
            if record.outcome != LOST or record.finished is None:
                continue
            key = ("LostPod", (record.name,))
            if key in self._seen_findings:
                continue
            if any(start <= record.finished <= end for start, end in self._windows):
                continue
            if self._open_since is not None and record.finished >= self._open_since:
                continue  # under the strike now under way (its window is recorded when it closes)
            self._find(
                "LostPod",
                f"Pod {WORKLOAD_NAMESPACE}/{record.name} ({record.kind} on {record.node} card {record.card}) "
                f"lost outside any fault's window: {record.why}",
                record.finished,
                (record.name, record.node),
            )

    def _drain(self, workload: Workload) -> None:
        """Deletes the workload's Pods and claims and waits, within the bound, until the nodes hold
        nothing of theirs: what is left then is a leak."""
        self.say("draining: the workload's Pods and claims are deleted; the nodes must free everything")
        plane = self.cluster.plane
        plane.kubectl("delete", "pods", "--all", "-n", WORKLOAD_NAMESPACE, "--wait=false", check=False)
        deadline = self.clock() + self.settings.bound
        while self.clock() < deadline:
            if not self._json_items("pods", "-n", WORKLOAD_NAMESPACE):
                break
            time.sleep(2)
        plane.kubectl(
            "delete", "resourceclaims", "--all", "-n", WORKLOAD_NAMESPACE, "--wait=false", check=False
        )
        while self.clock() < deadline:
            snapshot = self._snapshot()
            if snapshot is not None and not [o for o in snapshot.host if o.key not in self._baseline]:
                return
            time.sleep(2)
        snapshot = self._snapshot()
        for obj in snapshot.host if snapshot is not None else []:
            if obj.key not in self._baseline:
                self._find(
                    "Leak",
                    f"{obj.kind} {obj.id} on node {obj.node} is still there {self.settings.bound:.0f}s after "
                    "every workload Pod and claim was deleted",
                    self.clock(),
                    (f"{obj.node}/{obj.kind}/{obj.id}",),
                )

    def _final_checks(self) -> None:
        now = self.clock()
        for violation in invariants.memory_growth(
            self._memory, tolerance=self.settings.memory_tolerance, now=now
        ):
            self._find(violation.kind, violation.message, violation.at, violation.objects)

    def _find(self, kind: str, message: str, at: float, objects: tuple[str, ...]) -> None:
        """Records a violation once (the same one seen at the next check is the same finding), with
        the events around it and the logs of the components it involves."""
        key = (kind, objects)
        if key in self._seen_findings:
            return
        self._seen_findings.add(key)
        self.say(f"  VIOLATION {kind}: {message}")
        self.findings.append(
            Finding(
                kind=kind,
                message=message,
                at=at - self._begun,
                events=self.cluster.events(around=at),
                logs=self._log_tails(message, objects),
            )
        )

    def _log_tails(self, message: str, objects: tuple[str, ...], lines: int = 40) -> dict[str, str]:
        """Our components on a node the violation names, the controllers for an allocation, and
        the components of the last strike."""
        text = " ".join([message, *objects])
        names = [n for s in self.cluster.nodes if s.name in text for n in s.component_names]
        if "claim" in text or "device" in text:
            names += [p.name for p in self.cluster.controllers]
        names += [n for s in self.strikes[-1:] for n in _involved(self.cluster, s.target)]
        logs = self.cluster.logs()
        tails = {}
        for name in dict.fromkeys(names):
            path = logs.get(name)
            if path is not None and path.exists():
                tails[name] = "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        return tails

    def _components(
        self, start: Mapping[str, int | None], end: Mapping[str, int | None]
    ) -> list[ComponentFigures]:
        supervisor = self.cluster.supervisor
        figures = []
        for name in self.cluster.component_names:
            restarts = supervisor.restarts(name)
            figures.append(
                ComponentFigures(
                    name=name,
                    restarts_ours=sum(1 for r in restarts if r.ours),
                    restarts_own=sum(1 for r in restarts if not r.ours),
                    rss_start=start.get(name),
                    rss_end=end.get(name),
                )
            )
        return figures


def _involved(cluster: SoakCluster, target: str) -> list[str]:
    """Our components a strike's target names (a component, or a node)."""
    return [
        n
        for n in cluster.component_names
        if n in target or any(s.name in target and n.endswith(f"[{s.name}]") for s in cluster.nodes)
    ]


def _epoch(stamp: str | None) -> float | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


def _pod_figures(
    workload: Workload, strikes: Sequence[StrikeResult], *, begun: float, bound: float
) -> PodFigures:
    """Pods that ended otherwise than completed are the fault's casualties where the evidence
    says the fault ended them (soak.casualties), and lost otherwise."""
    records = list(workload.records.values())
    why: dict[str, int] = {}
    killed_by: dict[str, int] = {}
    for record in records:
        if record.outcome != LOST:
            continue
        killer = casualty_of(record, strikes, begun=begun, bound=bound)
        if killer is not None:
            killed_by[killer] = killed_by.get(killer, 0) + 1
            continue
        reason = record.why.split(":", 1)[0].split(" ", 1)[0] or "unknown"
        why[reason] = why.get(reason, 0) + 1
    return PodFigures(
        started=sum(1 for r in records if r.pod_created is not None),
        completed=sum(1 for r in records if r.outcome == COMPLETED),
        lost=sum(why.values()),
        lost_why=why,
        killed=sum(killed_by.values()),
        killed_by=killed_by,
    )


def say(text: str) -> None:
    print(text, flush=True)


def soak(settings: Settings, *, work: Path, report_path: Path, logs: Path) -> int:
    """Runs the soak on a cluster of its own; prints the report and writes its JSON. Exit code 0
    only when no violation was found, every strike worked and the nodes left nothing behind."""
    leftovers: list[str] = []
    with soak_cluster(work, say, leftovers, logs=logs) as cluster:
        if cluster.missing:
            say(f"fault hooks missing in this checkout: {', '.join(cluster.missing)}")
        result = Soak(cluster, settings, say=say).run()
    write(result, report_path)
    say("\n" + render(result))
    say(f"\nreport: {report_path}; logs: {logs}")
    if leftovers:
        print(f"the nodes left things behind: {leftovers}", file=sys.stderr, flush=True)
        return 1
    return 0 if result.passed else 1
