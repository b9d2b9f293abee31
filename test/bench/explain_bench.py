"""The controller's explanation in-process: ``explain_inputs`` at N nodes x 8 H100, pools built.

What gpu-dra-controller computes for a ClaimExplanation (docs/allocator.md#explain-served-by-the-controller)
without the API server around it: the slices of ``allocator_bench`` (28 devices per card), the 20
claims of ``scheduler_bench``'s mix allocated by one best-fit allocator (so its pool cache holds
every pool, as in a working controller) and every class's selector passes made ahead
(``Allocator.warm_classes``, as the controller's ``SelectorWarmer`` does once its caches synced),
then per claim of another seeded mix one explanation with best fit and one with first fit (a second
allocator over the same pool cache, as the controller's), each rendered twice (``--max-devices`` 40
and 5). Prints the CPU and wall seconds per explanation (the first one too), the load average, and a
digest of every report and outcome: equal digests, equal answers (compare two trees with
``PYTHONPATH=<an export of pkg api>:test .venv/bin/python -P -m bench.explain_bench``).

``PYTHONPATH=test .venv/bin/python -m bench.explain_bench [--nodes 1000] [--claims 4] [--all]``
(``--all``: the second rendering lists every device, as ``--all --max-devices 0``).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import statistics
import time

from kubernetes.client import ResourceV1ResourceClaim, V1ResourceClaimStatus

from bench.allocator_bench import cluster_slices, device_classes, h100_cards
from bench.scheduler_bench import workload
from pkg.dra.allocator import AllocationInputs, Allocator, BestFit, FirstFit, Unschedulable
from pkg.dra.allocator.pools import PoolCache
from pkg.dra.explain.report import explain_inputs


def main(nodes: int, claims: int, show_all: bool) -> None:
    began = time.monotonic()
    slices, classes = cluster_slices(nodes, h100_cards()), device_classes()
    cache = PoolCache()
    best, first = (
        Allocator(strategy=BestFit(), pool_cache=cache),
        Allocator(strategy=FirstFit(), pool_cache=cache),
    )
    allocated: list[ResourceV1ResourceClaim] = []
    for c in workload(20, "scale"):
        outcome = best.allocate(c, slices=slices, classes=classes, allocated_claims=allocated)
        if not isinstance(outcome, Unschedulable):
            c.status = V1ResourceClaimStatus(allocation=outcome)
            allocated.append(c)
    inputs = AllocationInputs.of(
        slices=slices, classes=classes, allocated_claims=allocated, namespace_labels={}
    )
    warmed = time.process_time()
    passes = best.warm_classes(slices, inputs.classes)  # what the controller's SelectorWarmer does
    warmed = time.process_time() - warmed
    print(f"explain in-process: {nodes} nodes x 8 H100 ({nodes * 224} devices; built in "
          f"{time.monotonic() - began:.0f}s; {len(allocated)} claims allocated; selectors warmed in "
          f"{warmed:.2f} s CPU, {passes} class x pool passes)", flush=True)  # fmt: skip
    gc.collect()
    gc.freeze()  # the controller's heap settler does as much for its long-lived caches
    digest = hashlib.sha256()
    cpu: list[float] = []
    wall: list[float] = []
    second = (True, 0) if show_all else (False, 5)
    for claim in workload(claims, "scale", seed=99):
        for allocator in (best, first):
            for listing, limit in ((False, 40), second):
                c0, w0 = time.process_time(), time.perf_counter()
                report = explain_inputs(
                    claim, inputs, allocator=allocator, show_all=listing, max_devices=limit
                )
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
                digest.update(report.text.encode())
                digest.update(str(report.allocatable).encode())
    print(f"  per explanation: CPU median {statistics.median(cpu):.3f} s "
          f"(min {min(cpu):.3f}, max {max(cpu):.3f}), "
          f"wall median {statistics.median(wall):.3f} s, first {wall[0]:.3f} s; "
          f"load {os.getloadavg()[0]:.1f}; {len(cpu)} reports, "
          f"digest {digest.hexdigest()[:16]}", flush=True)  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=4)
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    main(args.nodes, args.claims, args.all)
