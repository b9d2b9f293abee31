"""The control plane is the release the pass asked for, and its API server wants that release's
slice layout.

The integration tier runs its ``dra_api`` tests twice: against the pinned release and against the
oldest we support (``make test-integration-oldest``). Each pass names its release
(``GPU_CP_KUBERNETES_RELEASE``; the pinned one otherwise, read from the committed tool module), so
this test fails when a pass ran other binaries than it meant to. The layout expected of each
release is written here, not computed by the code under test: 1.34 keeps shared counters inside
the device slice; 1.35 moved them into a slice of their own (KEP-4815,
https://github.com/kubernetes/enhancements/tree/master/keps/sig-node/4815-dra-partitionable-devices).
The publishing tests then check that the slices the server stored have that shape.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pkg.devcluster.cluster import ControlPlane
from pkg.dra.model.slices import Layout, read_server_version
from pkg.framework.client import KubeClient

ROOT = Path(__file__).resolve().parents[2]
LAYOUT_OF_RELEASE = {"1.34": Layout.INLINE}  # every later release: Layout.SEPARATE

pytestmark = pytest.mark.dra_api


def pinned_release() -> str:
    """The release of the Kubernetes module every other tool is built with (``1.37``)."""
    go_mod = (ROOT / "hack" / "tools" / "kubernetes" / "go.mod").read_text()
    found = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes v1\.(\d+)\.\d+", go_mod, re.MULTILINE)
    assert found, "hack/tools/kubernetes/go.mod requires no k8s.io/kubernetes"
    return f"1.{found.group(1)}"


def test_the_server_is_the_release_asked_for_and_wants_its_layout(
    kube: KubeClient, control_plane: ControlPlane
) -> None:
    expected = os.environ.get("GPU_CP_KUBERNETES_RELEASE") or pinned_release()
    version = read_server_version(kube)
    assert f"{version.major}.{version.minor}" == expected
    assert control_plane.release.name == expected
    assert version.layout is LAYOUT_OF_RELEASE.get(expected, Layout.SEPARATE)
