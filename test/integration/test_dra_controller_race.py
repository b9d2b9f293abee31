"""Stress: Pods created right before their claims never get those claims allocated by us.

gpu-dra-controller judges "no Pod references the claim" from its Pod cache, which can lag its claim
cache; the decisions service therefore checks the Pods again right before it writes, as of the
claim's version (the Pod cache behind a read barrier, or a consistent LIST when it is late).
This test makes the lag likely: many Pod + claim pairs are created concurrently, each Pod an instant
before its claim, while the machine is busy (run it with the CPU loaded, see docs/testing.md). The
Pods can never be scheduled (their node selector matches no node), so the scheduler never allocates
their claims either: any allocation, any mark, any field written by ``gpu-dra-controller`` on one
of those claims is ours and a violation.

The verdict covers the whole run, not only the end state: a watch on the namespace's claims
records every version of every claim, and it is read only after a barrier claim created last has
come through it (a watch delivers in resourceVersion order). The run ends when every pair claim
carries the controller's ``LeftToScheduler`` event or was written by us (either way the controller
has judged it) and the control claims (no Pod) are allocated (so the controller was deciding
during the run). The
number of times the check before the write caught a Pod the cache had missed is printed: that is the
race this test is about, and under load it is usually non-zero.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest
from testutil.integration.dra_controller_process import (
    GpuNode,
    allocated_devices,
    controller,
    gpu_node,
    new_claim,
    pending_pod,
    written_by_us,
)
from testutil.integration.process_helpers import eventually
from testutil.k8s_fields import meta

from pkg.framework.client import KubeClient, WatchEventType, WatchStreamClosedError
from pkg.framework.client.builtin_kinds import EVENT, POD, RESOURCE_CLAIM
from pkg.framework.client.config import new_api_client

__all__ = ["controller", "gpu_node"]  # fixtures, imported to be used here

pytestmark = pytest.mark.dra_api

PAIRS = int(os.environ.get("DRA_RACE_PAIRS", "40"))
THREADS = 8
CONTROL_CLAIMS = 2  # the test node's card has four 1g MIG slots


class ClaimRecorder:
    """Watches the namespace's claims in a thread; remembers every claim we ever wrote."""

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        # Its own connection pool: the watch stream must not share a connection with ``kube``.
        self._client = KubeClient(new_api_client(kubeconfig), field_manager="race-recorder")
        self._namespace = namespace
        _, self._version = self._client.list(RESOURCE_CLAIM, namespace=namespace)
        self.written: set[str] = set()
        self.seen: set[str] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="claim-recorder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        events = self._client.watch(
            RESOURCE_CLAIM, resource_version=self._version, namespace=self._namespace, timeout_seconds=600
        )
        try:
            for event in events:
                if event.type not in (WatchEventType.ADDED, WatchEventType.MODIFIED):
                    continue
                claim = RESOURCE_CLAIM.decode(event.raw)
                with self._lock:
                    self.seen.add(str(meta(claim).name))
                    if written_by_us(claim):
                        self.written.add(str(meta(claim).name))
        except WatchStreamClosedError:
            pass  # the namespace or the server went away after the test; a gap fails the barrier

    def written_so_far(self) -> set[str]:
        with self._lock:
            return set(self.written)

    def has_seen(self, name: str) -> bool:
        with self._lock:
            return name in self.seen


def races(port: int) -> dict[str, float]:
    """The race counters by moment, and the consistent reads' count and total seconds."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    pattern = r'^gpu_dra_pod_reference_races_total\{when="([a-z-]+)"\} ([0-9.e+]+)$'
    found = {when: float(value) for when, value in re.findall(pattern, text, flags=re.MULTILINE)}
    for where in ("cache", "fallback"):
        value = re.search(
            rf'^gpu_dra_pod_barrier_total\{{outcome="{where}"\}} ([0-9.e+-]+)$', text, flags=re.MULTILINE
        )
        found[f"answers from {where}"] = float(value.group(1)) if value else 0.0
    for part in ("count", "sum"):
        value = re.search(rf"^gpu_dra_pod_check_seconds_{part} ([0-9.e+-]+)$", text, flags=re.MULTILINE)
        found[f"reads {part}"] = float(value.group(1)) if value else 0.0
    return found


def test_pods_created_just_before_their_claims_never_get_them_allocated(
    kube: KubeClient, kubeconfig: str, namespace: str, gpu_node: GpuNode, controller: int
) -> None:
    recorder = ClaimRecorder(kubeconfig, namespace)
    before = races(controller)
    mig = gpu_node.cls("mig")

    def pair(index: int) -> None:
        kube.create(POD, pending_pod(f"pod-{index}", namespace, f"pair-{index}"))
        kube.create(RESOURCE_CLAIM, new_claim(f"pair-{index}", namespace, mig))

    def control(index: int) -> None:
        kube.create(RESOURCE_CLAIM, new_claim(f"control-{index}", namespace, mig))

    with ThreadPoolExecutor(THREADS) as pool:
        jobs = [pool.submit(pair, i) for i in range(PAIRS)]
        jobs += [pool.submit(control, i) for i in range(CONTROL_CLAIMS)]
        for job in jobs:
            job.result()

    pairs = [f"pair-{i}" for i in range(PAIRS)]

    def undecided() -> list[str]:
        told = {
            str(e.regarding.name)
            for e in kube.list(EVENT, namespace=namespace)[0]
            if e.reason == "LeftToScheduler" and e.regarding is not None
        }
        return [n for n in pairs if n not in told and n not in recorder.written_so_far()]

    # Each pair claim ends either declined (the event) or written by us (a violation, named below).
    eventually(lambda: not undecided(), timeout=120, what="the controller's verdict on every pair claim")
    for i in range(CONTROL_CLAIMS):
        eventually(
            partial(allocated_devices, kube, namespace, f"control-{i}"),
            timeout=60,
            what=f"control claim {i} allocated",
        )
    # Barrier: once the recorder has seen a claim created now, it has seen every earlier version.
    kube.create(RESOURCE_CLAIM, new_claim("barrier", namespace, "no-such-class"))
    eventually(lambda: recorder.has_seen("barrier"), timeout=30, what="the recorder to catch up")

    violations = sorted(recorder.written & set(pairs))
    final = [c for c in pairs if written_by_us(kube.get(RESOURCE_CLAIM, c, namespace))]
    after = races(controller)
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    reads = delta.pop("reads count")
    mean_ms = delta.pop("reads sum") / reads * 1000 if reads else 0.0
    print(f"\n{PAIRS} pairs: races the checks caught, answers by source: {delta}; {reads:.0f} checks, "
          f"{mean_ms:.1f} ms each on average; violations: {violations}")  # fmt: skip
    assert violations == []
    assert final == []
    assert {f"control-{i}" for i in range(CONTROL_CLAIMS)} <= recorder.written
