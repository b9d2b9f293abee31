"""NodePrepare/NodeUnprepare latency of the gpu-handler's kubelet plugin, below the socket.

The real Prepare and Unprepare, the NVIDIA preparer and the simulated driver on a simulated A30
host (the node the preparation unit tests build, ``preparation_fakes.node``), with claims and offers in memory
and the simulated driver's state in memory too: what is measured is our work per claim — node
lock, checkpoint reads and durable writes (two fsyncs each), the NVML calls' logic, the CDI spec
— not the hardware's (creating a real MIG instance takes NVML tens to hundreds of milliseconds
on its own). Each
round prepares and then unprepares one claim; reported per operation and device type: p50, p99
and the target (p99 ≤ 50 ms). ``VFIO`` is a whole card passed through on the simulated workstation
host (the RTX A6000 and its HDMI audio function): the Pod read, the bare-metal and IOMMU-group
checks, six sysfs writes each way (the simulated kernel moving the links and making
``/dev/vfio/<group>``), the KEP-5304 metadata and the hook input.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from testutil.unit.gpuhandler.preparation.preparation_fakes import A30, Node, mig_offer, node, whole_offer

from bench.standalone_mocker import standalone_mocker
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.kinds import VFIO_ANNOTATION

ROUNDS = 200
QUICK_ROUNDS = 10
TARGET_P99_MS = 50.0


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _rounds(n: Node, make_claim: Callable[[int], ClaimRef], rounds: int) -> tuple[list[float], list[float]]:
    prepares, unprepares = [], []
    for index in range(rounds):
        claim = make_claim(index)
        started = time.perf_counter()
        outcome = n.driver.prepare([claim])[claim.uid]
        prepares.append((time.perf_counter() - started) * 1000)
        assert not outcome.error, outcome.error
        started = time.perf_counter()
        errors = n.driver.unprepare([claim])
        unprepares.append((time.perf_counter() - started) * 1000)
        assert errors == {claim.uid: ""}, errors
    return prepares, unprepares


def main(*, quick: bool = False) -> None:
    rounds = QUICK_ROUNDS if quick else ROUNDS
    print(f"NodePrepare / NodeUnprepare, one claim per call, {rounds} rounds (simulated A30, fsync on)")
    header = f"{'device':<10} {'operation':<10} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}"
    print(f"  {header}  target p99 <= {TARGET_P99_MS:g} ms")
    with tempfile.TemporaryDirectory() as tmp, standalone_mocker() as mocker:
        n = node(mocker, Path(tmp), driver_state_in_memory=True)
        [mig] = n.offers.publish(mig_offer(A30, start=3))
        [whole] = n.offers.publish(whole_offer(A30))
        cases = {
            # MIG mode stays on between rounds, as on a node that serves MIG claims.
            "MIG 1g": lambda i: n.claims.allocate(f"mig-{i}", [mig]),
            # The first whole-card round switches the card out of MIG mode; the rest find it whole.
            "Physical": lambda i: n.claims.allocate(f"whole-{i}", [whole]),
        }
        ws = node(mocker, Path(tmp) / "ws", fixture="rtx-workstation", driver_state_in_memory=True)
        [card] = ws.offers.publish(whole_offer("0000:65:00.0"))

        def vfio_claim(i: int) -> ClaimRef:
            pod = ws.pods.add(f"vm-{i}", {VFIO_ANNOTATION: "true"})
            return ws.claims.allocate(f"vm-{i}", [card], reserved_for=[pod])

        runs = [(name, n, make) for name, make in cases.items()] + [("VFIO", ws, vfio_claim)]
        for name, on, make in runs:
            prepares, unprepares = _rounds(on, make, rounds)
            for operation, samples in (("prepare", prepares), ("unprepare", unprepares)):
                p99 = _percentile(samples, 0.99)
                verdict = "ok" if p99 <= TARGET_P99_MS else "OVER"
                print(
                    f"  {name:<10} {operation:<10} {_percentile(samples, 0.5):8.2f} {p99:8.2f} "
                    f"{statistics.fmean(samples):8.2f}  {verdict}"
                )


if __name__ == "__main__":
    main()
