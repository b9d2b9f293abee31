"""``gpu-dra-controller explain <namespace>/<claim>``: why a claim gets these devices, or none.

The objects come from the cluster (``--kubeconfig``, or the in-cluster account) or from a YAML
bundle (``--bundle``; no cluster needed). Against a cluster the command first asks the running
gpu-dra-controller (a ClaimExplanation, :mod:`.request`): it holds every slice and pool already and
answers in seconds where reading 1,000 nodes' slices here takes 12-46 s. Without the CRD,
without the right to create the request, or without an answer in ``--timeout`` seconds it says so
on stderr and computes the explanation itself, as ``--local`` always does; the report is the same.

The explanation is the allocator's own, computed the way gpu-dra-controller decides (best fit;
``--strategy first-fit`` shows the scheduler's order), against every *other* allocated claim
among those objects — so for a claim that is already allocated it answers "what would it get now".

Exit codes, for scripts and CI: **0** allocatable, **1** not allocatable, **2** bad input or
nothing to explain (unreadable or invalid bundle, unknown claim, cluster unreachable), **3** the
explanation itself failed (a bug: no input should get here, and the message says what broke).
Errors go to stderr with the file, document or object they concern, never as a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

import yaml
from kubernetes.client import V1Node, V1ObjectMeta
from urllib3.exceptions import HTTPError

from api.gpu.v1alpha1 import ClaimExplanationSpec, ExplanationOutcome, ExplanationStrategy
from pkg.dra.allocator import AllocationInputs, Allocator, BestFit, FirstFit
from pkg.dra.explain.bundle import BundleError, ExplainObjects, load_bundle
from pkg.dra.explain.cluster import ClusterError, load_cluster
from pkg.dra.explain.render import describe_allocation
from pkg.dra.explain.report import Report, explain_inputs, explanation_document
from pkg.dra.explain.request import DEFAULT_TIMEOUT, NotServedError, ask
from pkg.dra.explain.slice_reader import paused_gc
from pkg.dra.explain.verdict import Verdict, from_status
from pkg.framework.client import ApiError, KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.client.config import new_api_client
from pkg.framework.keys import namespaced_key

EXIT_ALLOCATABLE, EXIT_NOT_ALLOCATABLE, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def parser(prog: str = "gpu-dra-controller explain") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("claim", help="the claim as <namespace>/<name>")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--kubeconfig", help="read the cluster with this kubeconfig (default: $KUBECONFIG)")
    source.add_argument("--bundle", type=Path, help="read the objects from this multi-document YAML file")
    p.add_argument("--node", help="allocate for this node only (default: any one node)")
    p.add_argument("--strategy", choices=("best-fit", "first-fit"), default="best-fit")
    p.add_argument("--all", action="store_true", help="list every device, also those the selectors reject")
    p.add_argument("--max-devices", type=int, default=40, help="devices listed per request (0: no limit)")
    p.add_argument(
        "--local",
        action="store_true",
        help="compute here from the cluster's objects instead of asking gpu-dra-controller",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("json", "yaml"),
        help="json or yaml: the verdict's causes as data, with the report (the same content, for scripts)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds to wait for gpu-dra-controller's answer before computing here",
    )
    return p


def _split(claim: str) -> tuple[str, str]:
    namespace, sep, name = claim.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise BundleError(f"claim {claim!r}: expected <namespace>/<name>")
    return namespace, name


def _load(args: argparse.Namespace, namespace: str) -> ExplainObjects:
    if args.bundle is not None:
        return load_bundle(args.bundle)
    client = getattr(args, "client", None)
    return load_cluster(kubeconfig=args.kubeconfig, namespace=namespace, node=args.node, client=client)


def _client(kubeconfig: str | None) -> KubeClient:
    try:
        return KubeClient(
            new_api_client(kubeconfig, user_agent="gpu-dra-controller-explain"), field_manager="explain"
        )
    except Exception as err:  # kubeconfig loading raises a zoo of types (ConfigException, OSError...)
        raise ClusterError(f"cannot load the kubeconfig: {err}") from None


def _node(objects: ExplainObjects, name: str | None, source: str) -> V1Node | None:
    if name is None:
        return None
    node = objects.nodes.get(name)
    if node is None and source == "bundle":
        # A node-local slice needs only the name; node selectors also need the Node's labels.
        return V1Node(metadata=V1ObjectMeta(name=name))
    if node is None:
        raise BundleError(f"node {name} not found")
    return node


def _spec(args: argparse.Namespace, name: str) -> ClaimExplanationSpec:
    return ClaimExplanationSpec(
        claim_name=name,
        strategy=ExplanationStrategy(args.strategy),
        node=args.node,
        all=args.all or None,
        max_devices=max(args.max_devices, 0),
    )


def _from_controller(
    kube: KubeClient, args: argparse.Namespace, key: tuple[str, str], out: TextIO, err: TextIO
) -> int | None:
    """The controller's answer printed and its exit code; None (and a warning) when it gave none."""
    namespace, name = key
    try:
        claim = kube.get(RESOURCE_CLAIM, name, namespace)
    except NotFoundError:
        print(f"error: ResourceClaim {namespace}/{name} not found in the cluster", file=err)
        return EXIT_BAD_INPUT
    except ApiError as error:
        if error.status != 403:
            print(f"error: cannot read the cluster: {error}", file=err)
            return EXIT_BAD_INPUT
        # An account that may list claims but not get one (the controller's own): the local path lists.
        print(f"warning: cannot get ResourceClaim {namespace}/{name} ({error.reason}); computing the "
              "explanation here (slower)", file=err)  # fmt: skip
        return None
    except (HTTPError, OSError) as error:
        print(f"error: cannot read the cluster: {error}", file=err)
        return EXIT_BAD_INPUT
    try:
        answer = ask(kube, claim, _spec(args, name), timeout=args.timeout)
    except NotServedError as why:
        print(f"warning: {why}; computing the explanation here (slower)", file=err)
        return None
    if answer.outcome is ExplanationOutcome.ERROR:
        print(f"error: {answer.reason}", file=err)
        return EXIT_BAD_INPUT
    allocatable = answer.outcome is ExplanationOutcome.ALLOCATABLE
    verdict = from_status(allocatable, answer.causes)
    _write(
        out,
        f"{namespace}/{name}",
        answer.report,
        verdict,
        current=answer.current_allocation,
        output=args.output,
    )
    return EXIT_ALLOCATABLE if allocatable else EXIT_NOT_ALLOCATABLE


def _write(
    out: TextIO, key: str, text: str, verdict: Verdict | None, *, current: str | None, output: str | None
) -> None:
    """The report as text, or (``-o json|yaml``) as one document with the verdict as data."""
    if output is None:
        if current is not None:
            print(f"note: {key} is already allocated: {current}", file=out)
        out.write(text)
        return
    document = explanation_document(key, text, verdict, current)
    if output == "json":
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump(document, sort_keys=False))


def run(argv: Sequence[str], *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = parser().parse_args(argv)
    try:
        namespace, name = _split(args.claim)
        if args.bundle is None and not args.local:
            kube = _client(args.kubeconfig)
            answered = _from_controller(kube, args, (namespace, name), out, err)
            if answered is not None:
                return answered
            args.client = kube
        objects = _load(args, namespace)
        key = namespaced_key(namespace, name)
        claim = objects.claims.get(key)
        if claim is None:
            where = str(args.bundle) if args.bundle is not None else "the cluster"
            raise BundleError(f"ResourceClaim {key} not found in {where}")
        node = _node(objects, args.node, "bundle" if args.bundle is not None else "cluster")
    except (BundleError, ClusterError) as error:
        print(f"error: {error}", file=err)
        return EXIT_BAD_INPUT
    try:
        report = explain_claim(
            objects,
            key,
            node=node,
            first_fit=args.strategy == "first-fit",
            show_all=args.all,
            max_devices=args.max_devices,
        )
    except Exception as error:  # every input error is handled above; this is a bug, said plainly
        print(f"error: explaining {key} failed: {type(error).__name__}: {error}", file=err)
        return EXIT_INTERNAL
    current = describe_allocation(report.current) if report.current is not None else None
    _write(out, key, report.text, report.verdict, current=current, output=args.output)
    return EXIT_ALLOCATABLE if report.allocatable else EXIT_NOT_ALLOCATABLE


def explain_claim(
    objects: ExplainObjects,
    key: str,
    *,
    node: V1Node | None,
    first_fit: bool = False,
    show_all: bool = False,
    max_devices: int = 40,
) -> Report:
    """Explains the claim ``key`` (``namespace/name``, present in ``objects``) against every *other*
    allocated claim there (:func:`~pkg.dra.explain.report.explain_inputs`, the one implementation
    gpu-dra-controller answers ClaimExplanations with). Shared by this command and ``kubectl gpu
    explain``, so both answer alike; an exception here is a bug, not an input error (callers check
    the claim exists first)."""
    claim = objects.claims[key]
    namespace = key.partition("/")[0]
    others = [
        c
        for k, c in objects.claims.items()
        if k != key and c.status is not None and c.status.allocation is not None
    ]
    allocator = Allocator(strategy=FirstFit() if first_fit else BestFit())
    inputs = AllocationInputs.of(
        slices=objects.slices,
        classes=objects.classes,
        allocated_claims=others,
        namespace_labels=objects.namespace_labels(namespace),
        node=node,
    )
    with paused_gc():  # one-shot: building 224,000 devices' pools is no time for full collections
        return explain_inputs(claim, inputs, allocator=allocator, show_all=show_all, max_devices=max_devices)


def main(argv: Sequence[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv)
