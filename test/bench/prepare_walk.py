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
reader follows the claim through fewer places. Run: ``PYTHONPATH=test .venv/bin/python -m bench.prepare_walk``
(``--files`` lists the walk).
"""

from __future__ import annotations

import sys
from collections import Counter

from testutil.unit.gpuhandler.preparation.prepare_walk_trace import walk

from bench.standalone_mocker import standalone_mocker


def main() -> None:
    scopes = {
        "all of pkg/": ((), True),
        "above the vendor port (pkg/backends/ transparent)": (("backends/",), True),
        "above the vendor port, calls only": (("backends/",), False),
    }
    for scope, (skip, returns) in scopes.items():
        with standalone_mocker() as mocker:
            files = walk(mocker, skip=skip, returns=returns)
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
