"""What a local control plane must be told differently for each Kubernetes release it runs.

The integration tier runs its DRA tests against two control planes: the release we pin for
everything (1.37) and the oldest we support (1.34, docs/kubernetes-versions.md). Their components
take the same flags but not the same feature gates: a component exits on a gate its release does
not know, and a release whose DRA features are still alpha serves their API versions only when
asked. So the differences live in one table, keyed by the minor version the API server binary
reports, and the control plane asks it before composing a command line.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

_VERSION = re.compile(r"\bv1\.(\d+)\.\d+")


@dataclass(frozen=True, kw_only=True)
class Release:
    """One minor release's differences from the newest.

    ``unknown_gates``: gates the release does not have (1.34 has no ``DRADeviceTaintRules``: an
    administrator's DeviceTaintRule is served, as v1alpha3, under ``DRADeviceTaints``).
    ``runtime_config``: API versions the API server must serve; on 1.34 the scheduler, with
    ``DRADeviceTaints`` on, watches DeviceTaintRules, which only ``resource.k8s.io/v1alpha3`` has.
    """

    minor: int
    unknown_gates: frozenset[str] = field(default_factory=frozenset)
    runtime_config: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"1.{self.minor}"

    def feature_gates(self, wanted: dict[str, bool]) -> dict[str, bool]:
        """``wanted`` without the gates this release would refuse to start with."""
        return {gate: on for gate, on in wanted.items() if gate not in self.unknown_gates}


OLDEST_SUPPORTED_MINOR: Final = 34
_RELEASES: Final = {
    34: Release(
        minor=34,
        unknown_gates=frozenset({"DRADeviceTaintRules"}),
        runtime_config=("resource.k8s.io/v1alpha3=true",),
    ),
}


def release(minor: int) -> Release:
    """The differences of release ``1.<minor>``; releases after the table's need none.

    A release older than the oldest we support is refused: its DRA API (resource.k8s.io/v1beta1
    and older) is not one our components speak.
    """
    if minor < OLDEST_SUPPORTED_MINOR:
        raise ValueError(
            f"Kubernetes 1.{minor} is older than 1.{OLDEST_SUPPORTED_MINOR}, the oldest supported"
        )
    return _RELEASES.get(minor, Release(minor=minor))


def parse_minor(version_output: str) -> int:
    """The minor version in a component's ``--version`` output (``Kubernetes v1.34.12``)."""
    found = _VERSION.search(version_output)
    if found is None:
        raise ValueError(f"no Kubernetes version (v1.N.M) in {version_output.strip()!r}")
    return int(found.group(1))


def release_of_binary(apiserver: Path) -> Release:
    """The release of the ``kube-apiserver`` binary at ``apiserver``, asked with ``--version``."""
    out = subprocess.run(
        [str(apiserver), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"{apiserver} --version failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}"
        )
    return release(parse_minor(out.stdout))
