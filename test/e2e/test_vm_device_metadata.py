"""KubeVirt's path to a passed-through card: the device metadata read by Kubernetes' own reader.

KubeVirt's virt-launcher (GPUsWithDRA / HostDevicesWithDRA) finds a VM's DRA devices through
KEP-5304 device metadata in its container: ``resourceclaims/<claim>/<request>/`` for a claim the
VM names, ``resourceclaimtemplates/<the Pod's name for the claim>/<request>/`` for one made from a
template, exactly one ``*-metadata.json`` there, whose ``resource.kubernetes.io/pciBusID``
attribute is the card to pass through (docs/vfio.md, "What KubeVirt reads").

Here the reader is not ours: ``devicemetadata`` (hack/tools/devicemetadata) is Kubernetes'
``k8s.io/dynamic-resource-allocation/devicemetadata`` package at the pinned release, built
statically and run as the container of a VFIO Pod on the real node, at the paths the container
sees. It prints what it decoded; the test checks the card's PCI address and the claim it names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from testutil.e2e.gpu_nodes import checkpoint
from testutil.k8s_fields import status_of, uid_of

from pkg.devcluster.cluster import ControlPlane, default_bin_dir
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.images import BUSYBOX_IMAGE, REGISTRY, static_binary_archive
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM
from pkg.gpuhandler.preparation.kinds import VFIO_ANNOTATION

RTX = "0000:65:00.0"  # the workstation node's card that can go to a VM
READER_IMAGE = f"{REGISTRY}/devicemetadata:1"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
REQUEST = "gpu"
DRIVER = "gpu.deckhouse.io"
_SEPARATOR = "==stream=="
METADATA_ROOT = "/var/run/kubernetes.io/dra-device-attributes"  # KEP-5304's, not our writer's constant


@pytest.fixture(scope="module")
def reader_archive(work_dir: Path) -> Path:
    """Kubernetes' device metadata reader as an image of its one static binary."""
    binary = default_bin_dir() / "devicemetadata"
    return static_binary_archive(work_dir / "devicemetadata.tar", reference=READER_IMAGE, binary=binary).path


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def _card_request() -> dict[str, Any]:
    return {"devices": {"requests": [{"name": REQUEST, "exactly": {"deviceClassName": "gpu-physical"}}]}}


def _reader_pod(name: str, node: str, claim: dict[str, str], args: list[str]) -> dict[str, Any]:
    """A VM launcher's Pod (VFIO annotation, one claim) whose containers are the reader: ``merged``
    reads the request's folder as KubeVirt does (every ``*-metadata.json`` in it), ``whole`` our
    driver's file alone, with the claim it names; ``listing`` (busybox) shows the request's folder
    and its files as they are, for the rules KubeVirt's own reader adds."""
    kind, claim_name, request = args
    folder = f"{METADATA_ROOT}/resourceclaim{'s' if kind == 'claim' else 'templates'}/{claim_name}/{request}"
    listing = {
        "name": "listing",
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", f"cd {folder} && ls && echo {_SEPARATOR} && cat ./*-metadata.json"],
        "resources": {"claims": [{"name": claim["name"]}]},
    }
    containers = [listing] + [
        {
            "name": container,
            "image": READER_IMAGE,
            "imagePullPolicy": "Never",
            "args": [*driver, *args],
            "resources": {"claims": [{"name": claim["name"]}]},
        }
        for container, driver in (("merged", []), ("whole", ["--driver", DRIVER]))
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {VFIO_ANNOTATION: "true"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [claim],
            "containers": containers,
        },
    }


def _read_in_pod(
    kube: KubeClient, plane: ControlPlane, namespace: str, objects: list[dict[str, Any]], pod: str
) -> dict[str, dict[str, Any]]:
    """Applies ``objects`` (the last is the Pod), waits for the readers to finish and returns what
    each container decoded; the caller deletes the Pod."""
    plane.kubectl("apply", "-n", namespace, "-f", "-", input_text=yaml.safe_dump_all(objects))
    wait_until(
        lambda: status_of(kube.get(POD, pod, namespace)).phase in ("Succeeded", "Failed"),
        timeout=120,
        what=f"the readers in Pod {pod} to finish",
    )
    phase = status_of(kube.get(POD, pod, namespace)).phase
    names = ("merged", "whole", "listing")
    out = {c: plane.kubectl("logs", "-n", namespace, pod, "-c", c, check=False) for c in names}
    assert phase == "Succeeded", f"a reader failed: {out}"
    files, stream = out.pop("listing").split(f"{_SEPARATOR}\n", 1)
    decoded = {container: dict(json.loads(text)) for container, text in out.items()}
    decoded["listing"] = {"files": files.split(), "stream": stream}
    return decoded


def _as_kubevirt_reads_it(listing: dict[str, Any]) -> str:
    """KubeVirt's rules on top of Kubernetes' (its pkg/dra reader): exactly one ``*-metadata.json``
    in the request's folder, the first object of the stream in ``v1alpha1`` (the only version it
    knows), the request by its exact name with exactly one device, ``pciBusID`` a non-empty
    string. Returns that string."""
    [only] = listing["files"]
    assert only.endswith("-metadata.json"), listing
    first, _end = json.JSONDecoder().raw_decode(listing["stream"].lstrip())
    assert first["apiVersion"] == "metadata.resource.k8s.io/v1alpha1"
    [device] = next(r["devices"] for r in first["requests"] if r["name"] == REQUEST)
    card = device["attributes"][PCI_BUS_ID]["string"]
    assert isinstance(card, str)
    assert card
    return card


def _the_card(decoded: dict[str, Any]) -> str:
    """The one device of the one request, as KubeVirt takes it: its pciBusID string."""
    [request] = decoded["requests"]
    assert request["name"] == REQUEST
    [device] = request["devices"]
    assert device["driver"] == DRIVER
    return str(device["attributes"][PCI_BUS_ID]["string"])


def test_kubernetes_reader_finds_the_card_of_a_vfio_claim_by_name_and_from_a_template(
    kube: KubeClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_node_ws: GpuComponents,
    reader_archive: Path,
) -> None:
    node = gpu_node_ws.node
    node.containerd.import_images(reader_archive)

    def read(source: dict[str, Any], pod: str, claim: dict[str, str], args: list[str]) -> dict[str, Any]:
        """Runs the readers with ``source`` (a claim or a template); both must find the card. The
        Pod is deleted and the claim unprepared before this returns."""
        decoded = _read_in_pod(
            kube, control_plane, namespace, [source, _reader_pod(pod, node.name, claim, args)], pod
        )
        assert _the_card(decoded["merged"]) == _the_card(decoded["whole"]) == RTX
        assert _as_kubevirt_reads_it(decoded["listing"]) == RTX
        kube.delete(POD, pod, namespace)
        wait_until(lambda: not checkpoint(node), timeout=90, what="the claim to be unprepared")
        return decoded

    # A claim the VM names: resourceclaims/<claim name>/<request>/.
    claim = _object("ResourceClaim", "vm-card", _card_request())
    decoded = read(
        claim, "vm-by-name", {"name": "card", "resourceClaimName": "vm-card"}, ["claim", "vm-card", REQUEST]
    )
    whole = decoded["whole"]
    assert (whole["namespace"], whole["name"]) == (namespace, "vm-card")
    assert whole["uid"] == uid_of(kube.get(RESOURCE_CLAIM, "vm-card", namespace))
    assert decoded["merged"]["podClaimName"] is whole["podClaimName"] is None

    # A claim made from a template: resourceclaimtemplates/<the Pod's name for it>/<request>/.
    template = _object("ResourceClaimTemplate", "vm-card-template", {"spec": _card_request()})
    decoded = read(
        template,
        "vm-from-template",
        {"name": "passthrough", "resourceClaimTemplateName": "vm-card-template"},
        ["template", "passthrough", REQUEST],
    )
    assert decoded["merged"]["podClaimName"] == decoded["whole"]["podClaimName"] == "passthrough"
    assert decoded["whole"]["name"].startswith("vm-from-template-passthrough-")  # the generated claim
