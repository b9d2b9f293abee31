"""``kubectl gpu``: flags, kubectl's conventions and exit codes.

kubectl finds the executable ``kubectl-gpu`` on ``PATH`` and runs it with the words after
``kubectl gpu``; it hands over no flags of its own, so this program reads the kubeconfig the way
kubectl does (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``, in-cluster), honours
``--context`` and takes the namespace from ``-n`` or the context. Global flags may stand before or
after the subcommand, as kubectl's do.

Exit codes: **0** done; **1** an error (cluster unreachable, credentials refused, a bug);
**2** bad usage; **3** not found (the claim or Pod); **4** forbidden (the message names the verb
and resource to ask for); **5** ``explain`` only: the claim (or one of the Pod's) cannot be
allocated now. Errors go to stderr as one sentence, never as a traceback; warnings (a read the
user may not make, a malformed usage entry) go to stderr too and do not change the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import NoReturn, TextIO

import yaml

from api.gpu.v1alpha1 import ExplanationStrategy
from pkg.app.kubectlgpu import device_conditions
from pkg.app.kubectlgpu import explain as explain_cmd
from pkg.app.kubectlgpu import top as top_cmd
from pkg.app.kubectlgpu.access import (
    EXIT_NOT_ALLOCATABLE,
    EXIT_USAGE,
    ForbiddenError,
    ObjectNotFoundError,
    PluginError,
    Reader,
    optional,
)
from pkg.app.kubectlgpu.table import OUTPUTS, write
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.dra.explain.allocation_text import describe_allocation
from pkg.dra.explain.request import DEFAULT_TIMEOUT
from pkg.framework.client import builtin_kinds
from pkg.framework.client.config import kubectl_api_client

PROG = "kubectl gpu"
POD_WORDS = ("pod", "pods", "po")
CLAIM_WORDS = ("resourceclaim", "resourceclaims")
EXAMPLES = """\
examples:
  # Who holds the GPUs of my namespace (or of namespace ml, or of all namespaces)
  kubectl gpu who
  kubectl gpu who -n ml -o wide
  kubectl gpu who -A --node worker-1
  kubectl gpu who --free

  # GPU memory and SM utilization per Pod and container, largest first
  kubectl gpu top
  kubectl gpu top -A --sort-by sm

  # Why claim train-0 gets these devices, or none; why Pod train waits for its GPUs
  kubectl gpu explain train-0 -n ml
  kubectl gpu explain pod/train -n ml

exit codes: 0 done, 1 error, 2 bad usage, 3 not found, 4 forbidden, 5 (explain) not allocatable
"""
WHO_HELP = """\
Which Pod and claim hold each card, MIG device or share: one row per device our driver
(gpu.deckhouse.io) allocated to a ResourceClaim of the namespace (-A: of every namespace), with the
Pods the claim is reserved for. TYPE, PHYSICALGPU and the wide columns come from ResourceSlices
and PhysicalGPUs where you may read them (a warning says when you may not). A share shows its
percentage of the card (SHARE) and its memory limit (MEMORY-LIMIT; <none>: TimeSlicing limits no
memory). -o wide adds STATUS: Ready, NotReady(REASON) where Prepare failed, Unhealthy(REASON),
<not prepared>. With --node, only that node's devices, and what nobody holds there as <free>; with
--free, only what nobody holds, on every node: free cards, the share left of shared cards, and
one more device of each type that fits beside the MIG devices held.
"""
TOP_HELP = """\
GPU memory and SM utilization per Pod and container, as gpu-handler last sampled them into the
claims' status.devices[] (AGE-OF-SAMPLE says how long ago). An allocated device without a
sample shows <no sample>; a malformed sample shows <malformed> and a warning naming the claim.
Sorted by GPU memory, largest first (--sort-by). SM% is - where the driver samples none (MIG).
"""
EXPLAIN_HELP = """\
Why the claim gets these devices, or none: the allocator's own explanation (what gpu-dra-controller
decides with), per request every device with its verdict, and what an allocation would consume.
It asks gpu-dra-controller: a ClaimExplanation is created in the claim's namespace (the edit role
may create them), answered from the controller's caches and deleted. Without that API, the right
to create it, or an answer within --timeout, it warns and computes the answer here (--local
forces this): it then reads ResourceSlices and DeviceClasses (cluster-scoped: the chart's
gpuViewer role grants them) and the claims that already hold devices; where you may not list
claims of other namespaces, only your namespace's allocations are counted and a warning says so.

A Pod (pod/NAME) is explained claim by claim, each under a heading naming where the claim comes
from: spec.resourceClaims (a claim, or the claim a template made), or a container's extended
resource backed by a DeviceClass. A claim that does not exist yet (a template's before the Pod
is scheduled, the claim the scheduler makes for extended resources) is explained as it would be
made, computed here, and nothing is created. A Pod that does not wait for devices (running,
scheduled, or asking for none) is said to be so. Exit code 5 when any claim cannot be allocated.

For an allocated claim, and for each claim of a Pod past scheduling, the devices' Ready and
Healthy conditions gpu-handler writes into status.devices are listed; a failed Prepare (why a Pod
waits in ContainerCreating) or an unhealthy device is said first, with its reason and message.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _common(defaults: bool) -> _Parser:
    """The global flags; only the top-level copy has defaults, so a subcommand's copy never
    overwrites a flag given before the subcommand."""
    d = (lambda value: value) if defaults else (lambda value: argparse.SUPPRESS)
    p = _Parser(add_help=False)
    p.add_argument(
        "--kubeconfig", default=d(None), help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )
    p.add_argument("--context", default=d(None), help="the kubeconfig context to use")
    p.add_argument("-n", "--namespace", default=d(None), help="namespace (default: the context's)")
    p.add_argument(
        "--request-timeout", type=float, default=d(30.0), help="seconds to wait for each API request"
    )
    return p


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Who holds which GPU, what it uses, and why a claim gets what it gets.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common(True)],
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    common = _common(False)

    def command(name: str, summary: str, description: str, *examples: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            parents=[common],
            help=summary,
            description=description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            epilog="examples:\n" + "".join(f"  kubectl gpu {name} {e}".rstrip() + "\n" for e in examples),
        )

    who = command(
        "who", "which Pod and claim hold each card, MIG device or share", WHO_HELP,
        "-n ml", "-A --node worker-1 -o wide",
    )  # fmt: skip
    _scope(who)
    who.add_argument("--node", help="only the devices on this node, and what nobody holds there")
    who.add_argument(
        "--free", action="store_true", help="only what nobody holds, on every node (or --node's)"
    )
    who.add_argument("-o", "--output", choices=OUTPUTS, help="wide, json or yaml")
    top = command(
        "top", "GPU memory and SM utilization per Pod and container", TOP_HELP, "", "-A --sort-by sm -o wide"
    )
    _scope(top)
    top.add_argument("--sort-by", choices=tuple(top_cmd.SORT_KEYS), default="memory")
    top.add_argument("-o", "--output", choices=OUTPUTS, help="wide, json or yaml")
    exp = command(
        "explain", "why a claim gets these devices, or none", EXPLAIN_HELP,
        "train-0 -n ml", "pod/wants-three-whole -n ml", "train-0 --node worker-1 --all -o yaml",
    )  # fmt: skip
    exp.add_argument(
        "claim",
        metavar="CLAIM|pod/POD",
        help="a ResourceClaim's name, or pod/NAME (a bare name that is no claim but a Pod's: that Pod)",
    )
    exp.add_argument("--node", help="allocate for this node only (default: any one node)")
    exp.add_argument("--strategy", choices=("best-fit", "first-fit"), default="best-fit")
    exp.add_argument("--all", action="store_true", help="list every device, also those the selectors reject")
    exp.add_argument("--max-devices", type=int, default=40, help="devices listed per request (0: no limit)")
    exp.add_argument("--local", action="store_true", help="compute here instead of asking gpu-dra-controller")
    exp.add_argument(
        "-o", "--output", choices=("json", "yaml"), help="json or yaml: the same reports, for scripts"
    )
    exp.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds to wait for gpu-dra-controller's answer before computing here",
    )
    return p


def _scope(p: argparse.ArgumentParser) -> None:
    p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")


def run(argv: Sequence[str], *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = parser().parse_args(argv)
    try:
        try:
            api_client, context_namespace = kubectl_api_client(
                args.kubeconfig, context=args.context, user_agent="kubectl-gpu"
            )
        except (
            Exception
        ) as error:  # the kubeconfig loaders raise a zoo of types (ConfigException, OSError...)
            raise PluginError(f"cannot load the kubeconfig: {error}") from None
        reader = Reader(api_client, request_timeout=args.request_timeout)
        namespace = args.namespace or context_namespace
        if args.command == "who":
            return _who(reader, args, namespace, out, err)
        if args.command == "top":
            return _top(reader, args, namespace, out, err)
        return _explain(reader, args, namespace, out, err)
    except PluginError as error:
        print(f"error: {error}", file=err)
        return error.exit_code


def _claims(reader: Reader, args: argparse.Namespace, namespace: str) -> list[dict[str, object]]:
    try:
        return reader.list_raw(builtin_kinds.RESOURCE_CLAIM, None if args.all_namespaces else namespace)
    except ForbiddenError as refusal:
        if refusal.namespace is None and args.all_namespaces:
            raise ForbiddenError(
                verb="list",
                resource=refusal.resource,
                namespace=None,
                hint=f' (without -A: the claims of namespace "{namespace}")',
            ) from None
        raise


def _empty(args: argparse.Namespace, namespace: str, err: TextIO) -> None:
    where = "" if args.all_namespaces else f" in {namespace} namespace"
    print(f"No resources found{where}.", file=err)


def _holders(
    reader: Reader, args: argparse.Namespace, namespace: str, claims: list[dict[str, object]], err: TextIO
) -> list[dict[str, object]]:
    """The claims ``<free>`` is judged against: every namespace's, since a card held in another
    namespace is not free; where the caller may not list them, the namespace's, with a warning."""
    if args.all_namespaces and not args.free:
        return claims
    everyone = optional(lambda: reader.list_raw(builtin_kinds.RESOURCE_CLAIM, None))
    if not isinstance(everyone, ForbiddenError):
        return everyone
    print(f"warning: {everyone}: <free> counts only the claims of namespace {namespace}", file=err)
    return claims if not args.free else _claims(reader, args, namespace)


def _who(reader: Reader, args: argparse.Namespace, namespace: str, out: TextIO, err: TextIO) -> int:
    # Imported here: who reads slices, whose models ``explain``'s start need not load.
    from pkg.app.kubectlgpu import who as who_cmd  # noqa: PLC0415 - see above

    claims = [] if args.free else _claims(reader, args, namespace)
    slices = optional(reader.resource_slices)
    gpus = optional(lambda: reader.list_all(PHYSICAL_GPU))
    catalogue = None
    if isinstance(slices, ForbiddenError):
        print(f"warning: {slices}: TYPE and PHYSICALGPU show <unknown>", file=err)
    else:
        if isinstance(gpus, ForbiddenError):
            print(f"warning: {gpus}: PHYSICALGPU shows the card's device name instead", file=err)
        catalogue = who_cmd.Catalogue(slices, [] if isinstance(gpus, ForbiddenError) else gpus)
    holders = (
        _holders(reader, args, namespace, claims, err) if catalogue and (args.free or args.node) else None
    )
    rows = who_cmd.who_view(claims, catalogue, node=args.node, free=args.free, holders=holders)
    if not rows and args.output not in ("json", "yaml"):
        _empty(args, namespace, err)
        return 0
    write(out, kind=who_cmd.KIND, columns=who_cmd.COLUMNS, rows=rows, output=args.output)
    return 0


def _top(reader: Reader, args: argparse.Namespace, namespace: str, out: TextIO, err: TextIO) -> int:
    claims = _claims(reader, args, namespace)
    view = top_cmd.top_view(claims, now=datetime.now(UTC), sort_by=args.sort_by)
    for problem in view.problems:
        print(f"warning: {problem}", file=err)
    if not view.rows and args.output not in ("json", "yaml"):
        _empty(args, namespace, err)
        return 0
    write(out, kind=top_cmd.KIND, columns=top_cmd.COLUMNS, rows=view.rows, output=args.output)
    return 0


def _explain(reader: Reader, args: argparse.Namespace, namespace: str, out: TextIO, err: TextIO) -> int:
    options = explain_cmd.Options(
        node=args.node,
        strategy=ExplanationStrategy(args.strategy),
        show_all=args.all,
        max_devices=args.max_devices,
        local=args.local,
        timeout=args.timeout,
    )
    kind, _, name = str(args.claim).rpartition("/")
    if kind.lower() in POD_WORDS:
        return _explain_pod(
            reader, namespace=namespace, name=name, options=options, output=args.output, out=out, err=err
        )
    if kind and kind.lower() not in CLAIM_WORDS:
        print(f"error: {args.claim}: explain takes a claim (NAME, resourceclaim/NAME) or pod/NAME", file=err)
        return EXIT_USAGE
    try:
        claim = reader.get(builtin_kinds.RESOURCE_CLAIM, name, namespace)
    except ObjectNotFoundError:
        if kind or not _is_pod(reader, name, namespace):
            raise
        return _explain_pod(
            reader, namespace=namespace, name=name, options=options, output=args.output, out=out, err=err
        )
    result = explain_cmd.answer(reader, claim, options, warn=lambda text: print(f"warning: {text}", file=err))
    for caveat in result.caveats:
        print(f"warning: {caveat}", file=err)
    devices = device_conditions.of_object(claim)
    if args.output in ("json", "yaml"):
        one = explain_cmd.report_item(
            result, namespace=namespace, claim=name, heading=None, source=None, created=True, devices=devices
        )
        document = {"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": explain_cmd.LIST_KIND, "items": [one]}
        _dump(out, document, args.output)
    else:
        # A failed Prepare or a sick device first: for an allocated claim it is the answer, not the
        # allocator's trace below it.
        for cause in device_conditions.cause_lines(devices):
            print(cause, file=out)
        if result.report.current is not None:
            note = describe_allocation(result.report.current)
            print(f"note: {namespace}/{name} is already allocated: {note}", file=out)
        out.write(device_conditions.section(devices))
        out.write(result.report.text)
    return 0 if result.report.allocatable else EXIT_NOT_ALLOCATABLE


def _is_pod(reader: Reader, name: str, namespace: str) -> bool:
    """Whether a name that is no claim is a Pod's (a Pod the user may not read: not one to them)."""
    try:
        reader.get(builtin_kinds.POD, name, namespace)
    except (ObjectNotFoundError, ForbiddenError):
        raise ObjectNotFoundError(
            f'ResourceClaim or Pod "{name}" not found in namespace "{namespace}"'
        ) from None
    return True


def _explain_pod(
    reader: Reader,
    *,
    namespace: str,
    name: str,
    options: explain_cmd.Options,
    output: str | None,
    out: TextIO,
    err: TextIO,
) -> int:
    # Imported here: the Pod's model is a hundred modules a claim's explanation never needs.
    from pkg.app.kubectlgpu import explain_pod  # noqa: PLC0415 - see above

    result = explain_pod.explain_pod(reader, namespace, name, options)
    for claim in result.claims:
        for caveat in claim.explained.caveats:
            print(f"warning: {claim.name}: {caveat}", file=err)
    if output in ("json", "yaml"):
        _dump(out, explain_pod.document(result), output)
    else:
        out.write(explain_pod.render(result))
    return 0 if result.allocatable else EXIT_NOT_ALLOCATABLE


def _dump(out: TextIO, document: Mapping[str, object], output: str) -> None:
    if output == "json":
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump(document, sort_keys=False))


def main(argv: Sequence[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv)
