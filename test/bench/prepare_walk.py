"""The walk of one MIG claim through NodePrepare: which files under pkg/ the call visits, in order.

One MIG claim is prepared through the real :class:`~pkg.gpuhandler.preparation.driver.GpuDriver`
(the node the preparation unit tests build: the NVIDIA preparer over the simulated NVML, started as
the plugin starts before it serves) while
``sys.setprofile`` records every Python call. Each call into a function defined in another file
under ``pkg/`` than the one control is in, and each return to a caller in another file, is a step
of the walk (code outside ``pkg/`` is transparent); reported are the distinct files visited and
the *returns*: entering a file that the walk had already left before. Three scopes: all of
``pkg/``; above the vendor port (the NVIDIA preparer and the simulated driver transparent: the
preparation code a reader follows); and that once more counting calls only. Fewer of both means a
reader follows the claim through fewer places. Run: ``.venv/bin/python test/bench/prepare_walk.py``
(``--files`` lists the walk).
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # k8s_fields, which preparation_fakes uses
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "gpuhandler" / "preparation"))

from preparation_fakes import A30, mig_offer, node

PKG = Path(__file__).resolve().parents[2] / "pkg"


def walk(*, skip: tuple[str, ...] = (), returns: bool = True) -> list[str]:
    """The files under pkg/ control passes through during one MIG prepare, one entry per change;
    files under the folders ``skip`` (relative to pkg/) are transparent too. Without ``returns``,
    only calls move the walk (a function's return to its caller does not)."""
    with tempfile.TemporaryDirectory() as tmp:
        n = node(Path(tmp))
        [offer] = n.offers.publish(mig_offer(A30, start=3))
        claim = n.claims.allocate("train", [offer])
        driver = n.driver  # built before tracing: the walk is the call, not the wiring
        # Started as PluginRunnable starts the plugin before it serves: start-up reconciliation,
        # then the base CDI spec for the loaded driver (the driver's files found once, not per call).
        n.reconcile()
        n.container.driver_spec().refresh()
        files: list[str] = []

        def profile(frame: FrameType, event: str, _arg: Any) -> None:
            if event == "call":
                where: FrameType | None = frame  # control enters the callee
            elif event == "return" and returns:
                where = frame.f_back  # and comes back to its caller
            else:
                return  # C functions: no Python file
            if where is None:
                return
            path = Path(where.f_code.co_filename)
            if not path.is_relative_to(PKG):
                return  # the standard library, pydantic, ...: the walk stays where it was
            name = str(path.relative_to(PKG))
            if name.startswith(skip):
                return
            if not files or files[-1] != name:
                files.append(name)

        sys.setprofile(profile)
        try:
            outcome = driver.prepare([claim])[claim.uid]
        finally:
            sys.setprofile(None)
        assert outcome.error == "", outcome.error
        return files


def main() -> None:
    scopes = {
        "all of pkg/": ((), True),
        "above the vendor port (pkg/backends/ transparent)": (("backends/",), True),
        "above the vendor port, calls only": (("backends/",), False),
    }
    for scope, (skip, returns) in scopes.items():
        files = walk(skip=skip, returns=returns)
        distinct = set(files)
        back = len(files) - len(distinct)
        print(f"one MIG claim through NodePrepare, {scope}: {len(distinct)} files, {back} returns")
        for name, count in Counter(files).most_common():
            if count > 1:
                print(f"  {name}: entered {count} times")
        if "--files" in sys.argv:
            print("  " + " -> ".join(files))


if __name__ == "__main__":
    main()
