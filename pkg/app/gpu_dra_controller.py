"""``gpu-dra-controller``: allocates the claims no scheduler will (spec §2.1 C.1, §9.1; DESIGN §5).

Run without a subcommand it is the controller: it competes for a Lease and, while leading,
allocates unallocated ResourceClaims of our device classes that no Pod references (see
:mod:`pkg.controller.resourceclaim`). ``gpu-dra-controller explain <namespace>/<claim>`` prints
why a claim gets the devices it gets, or none, from the cluster or a YAML bundle (see
:mod:`pkg.dra.explain.cli`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Sequence

from pkg.app.options import add_manager_flags, manager_options
from pkg.app.runtime import RuntimeContainer
from pkg.controller.manager import install_signal_handlers
from pkg.controller.resourceclaim.setup import ResourceClaimContainer, setup_controller
from pkg.dra.explain import cli as explain_cli
from pkg.logger import setup_logging

COMPONENT = "gpu-dra-controller"
EXPLAIN = "explain"
log = logging.getLogger(COMPONENT)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=COMPONENT,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"subcommand: {COMPONENT} {EXPLAIN} <namespace>/<claim> [--bundle FILE] (see {EXPLAIN} -h)",
    )
    add_manager_flags(p, default_lease="gpu-dra-controller-leader")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [EXPLAIN]:
        return explain_cli.run(args[1:])
    options = manager_options(parser().parse_args(args))
    setup_logging()
    runtime = RuntimeContainer(options=options, component=COMPONENT)
    claims = ResourceClaimContainer(
        client=runtime.client(), informers=runtime.informers(), recorder=runtime.recorder()
    )
    claims.config.workers.from_value(options.workers)
    manager = runtime.manager()
    setup_controller(manager, claims)
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
