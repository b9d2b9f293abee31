"""SIGHUP: an immediate sync on an operator's request (``kill -HUP <pid>``).

The handler only starts a thread that enqueues: a Python signal handler runs between two bytecodes
of the main thread, which might hold a lock the enqueue needs (the same reasoning as
:func:`pkg.framework.manager.manager.install_signal_handlers`).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

logger = logging.getLogger(__name__)


def install_sighup_trigger(enqueue: Callable[[], None]) -> None:
    """Makes SIGHUP call ``enqueue``; must be called from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("signal handlers can only be installed from the main thread")

    def enqueue_logged() -> None:
        logger.info("received SIGHUP: syncing now")
        enqueue()

    def handle(_signum: int, _frame: FrameType | None) -> None:
        threading.Thread(target=enqueue_logged, name="sighup-sync", daemon=True).start()

    signal.signal(signal.SIGHUP, handle)
