"""``kubectl gpu who`` in-process at N nodes x 8 H100, on recorded API answers.

``who`` reads what ``explain --local`` reads — every ResourceSlice (28 devices per card, the
slices of ``allocator_bench``) — plus the claims, and joins them; unlike ``explain`` it has no
controller to ask, so its time at scale is the read of the slices plus the join. The API's answers
are recorded once (the slices as the server's JSON pages of 500, as ``list_page_json`` returns
them; the claims as dicts) and the plugin's own ``run`` is called with a reader that returns them,
so what is timed is the plugin's work without the API server's transfer: decoding the pages by
parts, the catalogue, the rows and the table. The claims: per node a whole card, a MIG 1g device
and two MPS shares of one card (one with the percentage only, one with memory too), 4 claims a node.

Timed, each ``--runs`` times (CPU and wall, median): ``who -A`` (every held device) and
``who --free`` (what nobody holds on every node), with the slice read apart; plus the cost of
starting the plugin (its imports) in a fresh interpreter.

``PYTHONPATH=test .venv/bin/python -m bench.who_bench [--nodes 1000] [--runs 3]``, or ``python -m bench
--only who`` (``--quick``: 20 nodes, one run).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes.client import V1ResourceSlice

from bench.allocator_bench import cluster_slices, h100_cards
from pkg.app.kubectlgpu import cli
from pkg.domain.names import DRIVER
from pkg.dra.explain.slice_reader import PAGE_SIZE, read_slices

NAMESPACE = "bench"


class RecordedApi:
    """The API's answers, recorded once: the slices as JSON pages, the claims as dicts."""

    def __init__(self, slices: list[V1ResourceSlice], claims: list[dict[str, Any]]) -> None:
        self.claims = claims
        items = [
            s.model_dump(by_alias=True, exclude_none=True, mode="json") for s in slices
        ]  # as the server writes it
        self.pages = [
            json.dumps(
                {
                    "kind": "ResourceSliceList",
                    "metadata": {"continue": str(i + PAGE_SIZE) if i + PAGE_SIZE < len(items) else ""},
                    "items": items[i : i + PAGE_SIZE],
                }
            ).encode()
            for i in range(0, len(items), PAGE_SIZE)
        ]

    def list_page_json(self, kind: object, *, limit: int, continue_token: str | None = None) -> bytes:
        return self.pages[int(continue_token or 0) // PAGE_SIZE]


class RecordedReader:
    """What ``cli`` asks of its reader, answered from the recording."""

    def __init__(self, api: RecordedApi) -> None:
        self._api = api

    def list_raw(self, kind: object, namespace: str | None = None) -> list[dict[str, Any]]:
        return self._api.claims

    def resource_slices(self) -> list[V1ResourceSlice]:
        return read_slices(self._api)  # type: ignore[arg-type]  # the one method read_slices calls

    def list_all(self, kind: object) -> list[Any]:
        return []  # no PhysicalGPUs: PHYSICALGPU shows the device name


def held_claims(nodes: int) -> list[dict[str, Any]]:
    """Per node: card 0 whole, a 1g MIG device of card 1, two MPS shares of card 2."""
    claims = []
    for n in range(nodes):
        node = f"node-{n:04d}"
        held = [
            ("whole", "gpu-0000-18-00-0", None),
            ("mig", "gpu-0000-2a-00-0-mig-19-0", None),
            ("mps-a", "gpu-0000-3a-00-0-mps", {"sharePercent": "30"}),
            ("mps-b", "gpu-0000-3a-00-0-mps", {"sharePercent": "20", "memory": "8Gi"}),
        ]
        for what, device, consumed in held:
            result: dict[str, Any] = {
                "request": "gpu",
                "driver": DRIVER,
                "pool": f"gpus/{node}",
                "device": device,
            }
            if consumed is not None:
                result |= {"consumedCapacity": consumed, "shareID": f"{what}-{n}"}
            claims.append(
                {
                    "metadata": {"namespace": NAMESPACE, "name": f"{what}-{n}"},
                    "status": {
                        "allocation": {"devices": {"results": [result]}},
                        "reservedFor": [{"resource": "pods", "name": f"{what}-{n}"}],
                    },
                }
            )
    return claims


@contextmanager
def recorded(api: RecordedApi) -> Iterator[None]:
    """``cli.run`` with the recording instead of a cluster (no kubeconfig is read)."""
    fakes: dict[str, Callable[..., object]] = {
        "kubectl_api_client": lambda *_, **__: (None, NAMESPACE),
        "Reader": lambda *_, **__: RecordedReader(api),
    }
    saved = {name: getattr(cli, name) for name in fakes}
    for name, fake in fakes.items():
        setattr(cli, name, fake)
    try:
        yield
    finally:
        for name, real in saved.items():
            setattr(cli, name, real)


def timed(runs: int, work: Callable[[], object]) -> tuple[float, float, object]:
    """Median CPU and wall seconds of ``runs`` calls, and the last call's answer."""
    cpu, wall, answer = [], [], None
    for _ in range(runs):
        c, w = time.process_time(), time.perf_counter()
        answer = work()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall), answer


def who(argv: list[str]) -> Callable[[], str]:
    def work() -> str:
        out, err = io.StringIO(), io.StringIO()
        if cli.run(["who", *argv], out=out, err=err) != 0:
            raise RuntimeError(f"kubectl gpu who {' '.join(argv)} failed: {err.getvalue()}")
        return out.getvalue()

    return work


def start_seconds() -> float:
    """A fresh interpreter importing what ``who`` imports: the plugin's start before any request."""
    code = "import pkg.app.kubectlgpu.cli, pkg.app.kubectlgpu.who, pkg.dra.explain.slice_reader"
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - began


def main(nodes: int = 1000, runs: int = 3, *, quick: bool = False) -> None:
    if quick:  # make bench-smoke: the same path at a small size
        nodes, runs = 20, 1
    began = time.monotonic()
    slices = cluster_slices(nodes, h100_cards())
    api = RecordedApi(slices, held_claims(nodes))
    del slices
    megabytes = sum(len(p) for p in api.pages) / 2**20
    print(
        f"who in-process: {nodes} nodes x 8 H100 ({nodes * 224} devices, {megabytes:.0f} MB of slice JSON "
        f"in {len(api.pages)} pages; {len(api.claims)} claims; recorded in {time.monotonic() - began:.0f}s)",
        flush=True,
    )
    print(f"  plugin start (imports): {start_seconds():.2f} s wall", flush=True)
    cpu, wall, _ = timed(runs, lambda: read_slices(api))  # type: ignore[arg-type]
    print(f"  {'reading the slices:':<23} CPU {cpu:.2f} s, wall {wall:.2f} s (median of {runs})", flush=True)
    with recorded(api):
        for argv in (["-A"], ["--free"]):
            cpu, wall, table = timed(runs, who(argv))
            rows = str(table).count("\n") - 1
            what = f"who {' '.join(argv)}:"
            print(
                f"  {what:<23} CPU {cpu:.2f} s, wall {wall:.2f} s (median of {runs}; {rows} rows)", flush=True
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    main(args.nodes, args.runs)
