"""Transitional: the VFIO holds moved to :mod:`pkg.gpuhandler.preparation.vfio_holds`.

Only ``pkg/gpuhandler/setup.py`` still imports them from here, with the ``load`` of a second
checkpoint reader that the holds no longer take (they follow the plugin's checkpoint store). Its
import moves at merge; then this file goes.
"""

from __future__ import annotations

from pkg.gpuhandler.preparation import vfio_holds


class VfioHolds(vfio_holds.VfioHolds):
    def __init__(self, load: object = None) -> None:  # ``load`` is ignored: nothing is read here
        super().__init__()
