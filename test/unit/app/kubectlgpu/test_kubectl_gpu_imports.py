"""``kubectl gpu``'s start: a process the controller answers imports none of the local computation
(docs/allocator.md#explain-served-by-the-controller, "The plugin's start").

Each check runs a fresh interpreter, because this test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

# What the controller path never needs: the allocator and the renderer, the slice and bundle
# readers, and the models only the local computation or `who` decode (Pod, DaemonSet and Node
# pull in about a hundred model modules).
NOT_ON_THE_CONTROLLER_PATH = (
    "pkg.dra.allocator",
    "pkg.dra.explain.render",
    "pkg.dra.explain.cli",
    "pkg.dra.explain.slice_reader",
    "pkg.dra.explain.bundle",
    "pkg.app.kubectlgpu.who",
    "kubernetes.client.models.v1_pod",
    "kubernetes.client.models.v1_daemon_set",
    "kubernetes.client.models.v1_node",
    "kubernetes.client.models.v1_resource_slice",
)


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_the_controller_path_imports_no_local_computation() -> None:
    loaded = _modules_after(
        "from pkg.app.kubectlgpu import cli\n"
        "from pkg.app.kubectlgpu.explain import from_controller\n"
        "from pkg.dra.explain.request import ask\n"
        "from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM\n"
        "cli.parser().parse_args(['explain', 'c'])"
    )
    assert "pkg.app.kubectlgpu.explain" in loaded  # the probe imported what it meant to
    assert sorted(m for m in NOT_ON_THE_CONTROLLER_PATH if m in loaded) == []


def test_the_local_computation_still_imports_what_it_needs() -> None:
    loaded = _modules_after("from pkg.app.kubectlgpu.access import Reader\nReader.resource_slices")
    assert "pkg.dra.explain.slice_reader" not in loaded  # imported when slices are read, below
    loaded = _modules_after("from pkg.dra.explain.cli import explain_claim")
    assert {"pkg.dra.allocator", "pkg.dra.explain.bundle", "kubernetes.client.models.v1_node"} <= loaded
