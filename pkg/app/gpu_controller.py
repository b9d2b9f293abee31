"""``gpu-controller``: PhysicalGPU conditions, orphan cleanup and inventory metrics (spec §2.1 A)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from pkg.app.options import add_manager_flags, manager_options
from pkg.app.runtime import RuntimeContainer, run_controllers
from pkg.framework.manager.manager import Manager
from pkg.gpucontroller.physicalgpu.setup import PhysicalGPUContainer, setup_controller

COMPONENT = "gpu-controller"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMPONENT, description=__doc__)
    add_manager_flags(parser, default_lease="gpu-controller-leader")
    options = manager_options(parser.parse_args(argv))

    def setup(runtime: RuntimeContainer, manager: Manager) -> Callable[[], None]:
        container = PhysicalGPUContainer(
            client=runtime.client(), informers=runtime.informers(), recorder=runtime.recorder()
        )
        container.config.workers.from_value(options.workers)
        setup_controller(manager, container)
        return runtime.recorder().stop

    return run_controllers(component=COMPONENT, options=options, setup=setup)


if __name__ == "__main__":
    sys.exit(main())
