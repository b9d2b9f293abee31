"""``gpu-dra-controller``: allocates the claims no scheduler will (see :mod:`pkg.dracontroller`).

Run without a subcommand it is the controller: it competes for a Lease and, while leading,
allocates unallocated ResourceClaims of our device classes that no Pod references (see
:mod:`pkg.dracontroller`), and answers ClaimExplanations (:mod:`pkg.dracontroller.explanations`).
``gpu-dra-controller explain <namespace>/<claim>`` prints why a claim gets the devices it gets, or
none: asked of the running controller, or computed from the cluster or a YAML bundle (see
:mod:`pkg.dra.explain.cli`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from pkg.app.options import add_manager_flags, manager_options, parse_duration
from pkg.app.runtime import RuntimeContainer, run_controllers
from pkg.dra.explain import cli as explain_cli
from pkg.dracontroller.explanations.reconciler import DEFAULT_TTL as DEFAULT_EXPLANATION_TTL
from pkg.dracontroller.setup import (
    DEFAULT_ACCOUNTING_PERIOD,
    DEFAULT_LEDGER,
    DEFAULT_WORKERS,
    ResourceClaimContainer,
    require_custom_kinds,
    setup_controller,
)
from pkg.framework.manager.manager import Manager

COMPONENT = "gpu-dra-controller"
EXPLAIN = "explain"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=COMPONENT,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"subcommand: {COMPONENT} {EXPLAIN} <namespace>/<claim> [--bundle FILE] (see {EXPLAIN} -h)",
    )
    # Workers bound how many claims' writes are on the wire at once (decisions stay serial).
    add_manager_flags(p, default_lease="gpu-dra-controller-leader", default_workers=DEFAULT_WORKERS)
    p.add_argument(
        "--allocation-ledger",
        default=DEFAULT_LEDGER,
        help="ConfigMap (in the Lease's namespace) that keeps device-seconds across restarts",
    )
    p.add_argument(
        "--accounting-period",
        type=parse_duration,
        default=DEFAULT_ACCOUNTING_PERIOD,
        help="how often held allocations are charged and the ledger written (seconds or 10s/1m)",
    )
    p.add_argument(
        "--explanation-ttl",
        type=parse_duration,
        default=DEFAULT_EXPLANATION_TTL,
        help="how long an answered ClaimExplanation is kept before it is deleted (seconds or 30s/10m)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [EXPLAIN]:
        return explain_cli.run(args[1:])
    parsed = parser().parse_args(args)
    options = manager_options(parsed)

    def setup(runtime: RuntimeContainer, manager: Manager) -> Callable[[], None]:
        require_custom_kinds(runtime.client())  # a missing CRD is named now, not as a sync timeout
        container = ResourceClaimContainer(
            client=runtime.client(), informers=runtime.informers(), recorder=runtime.recorder()
        )
        container.config.workers.from_value(options.workers)
        container.config.accounting.from_dict(
            {
                "namespace": options.leader_election_namespace,
                "ledger": parsed.allocation_ledger,
                "period": parsed.accounting_period,
            }
        )
        container.config.explanations.ttl.from_value(parsed.explanation_ttl)
        setup_controller(manager, container)
        return runtime.recorder().stop

    return run_controllers(component=COMPONENT, options=options, setup=setup)


if __name__ == "__main__":
    sys.exit(main())
