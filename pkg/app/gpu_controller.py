"""``gpu-controller``: PhysicalGPU conditions, orphan cleanup and inventory metrics (spec §2.1 A)."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Sequence

from pkg.app.options import add_manager_flags, manager_options
from pkg.app.runtime import RuntimeContainer
from pkg.controller.manager import install_signal_handlers
from pkg.controller.physicalgpu.setup import PhysicalGPUContainer, setup_controller
from pkg.logger import setup_logging

COMPONENT = "gpu-controller"
log = logging.getLogger(COMPONENT)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMPONENT, description=__doc__)
    add_manager_flags(parser, default_lease="gpu-controller-leader")
    options = manager_options(parser.parse_args(argv))
    setup_logging()
    runtime = RuntimeContainer(options=options, component=COMPONENT)
    physicalgpu = PhysicalGPUContainer(
        client=runtime.client(), informers=runtime.informers(), recorder=runtime.recorder()
    )
    physicalgpu.config.workers.from_value(options.workers)
    manager = runtime.manager()
    setup_controller(manager, physicalgpu)
    stop = threading.Event()
    install_signal_handlers(stop)
    log.info("starting", extra={"leader_elect": options.leader_elect})
    try:
        manager.run(stop)
    finally:
        runtime.recorder().stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
