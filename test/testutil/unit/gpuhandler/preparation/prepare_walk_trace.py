"""The walk of one MIG claim through NodePrepare: which files under pkg/ the call visits, in order.

One MIG claim is prepared through the real :class:`~pkg.gpuhandler.preparation.driver.GpuDriver`
(the node the preparation unit tests build: the NVIDIA preparer over the simulated NVML, started as
the plugin starts before it serves) while ``sys.setprofile`` records every Python call. Each call
into a function defined in another file under ``pkg/`` than the one control is in, and each return
to a caller in another file, is a step of the walk (code outside ``pkg/`` is transparent). Used by
``test/bench/prepare_walk.py`` (which prints it) and by the unit test that bounds it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

from pytest_mock import MockerFixture

from testutil.unit.gpuhandler.preparation.preparation_fakes import A30, mig_offer, node

PKG = Path(__file__).resolve().parents[5] / "pkg"


def walk(mocker: MockerFixture, *, skip: tuple[str, ...] = (), returns: bool = True) -> list[str]:
    """The files under pkg/ control passes through during one MIG prepare, one entry per change;
    files under the folders ``skip`` (relative to pkg/) are transparent too. Without ``returns``,
    only calls move the walk (a function's return to its caller does not). ``mocker`` makes the
    node's API-facing stand-ins (:func:`preparation_fakes.node`)."""
    with tempfile.TemporaryDirectory() as tmp:
        n = node(mocker, Path(tmp))
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
