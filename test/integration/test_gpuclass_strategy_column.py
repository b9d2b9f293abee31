"""``kubectl get gpuclasses`` shows the Strategy of every class, on the real API server.

The Strategy column is a JSONPath the API server evaluates on the stored object, and only the
CRD's ``sharing: {}`` default (applied by the server when it decodes an object) gives a class that
names no sharing a strategy to show. The unit test of the column evaluates a copy of that logic;
this one asks the server itself: an exclusive, a MIG and two shared classes are created without
a controller running, and the table kubectl prints must say Exclusive, Exclusive, MPS and
TimeSlicing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from pkg.devcluster.cluster import ControlPlane

# (name suffix, spec, the Strategy kubectl must print)
CLASSES: list[tuple[str, dict[str, Any], str]] = [
    ("whole", {"vendor": "Nvidia", "deviceType": "Physical"}, "Exclusive"),
    (
        "mig",
        {"vendor": "Nvidia", "deviceType": "MIG", "nvidia": {"mig": {"profile": "1g.10gb"}}},
        "Exclusive",
    ),
    ("mps", {"vendor": "Nvidia", "deviceType": "Physical", "sharing": {"strategy": "MPS"}}, "MPS"),
    (
        "ts",
        {"vendor": "Nvidia", "deviceType": "Physical", "sharing": {"strategy": "TimeSlicing"}},
        "TimeSlicing",
    ),
]


@pytest.fixture
def classes(control_plane: ControlPlane, unique: str) -> Iterator[dict[str, str]]:
    """The classes, created through kubectl as a user would apply them; name -> expected Strategy."""
    names = {f"strategy-{suffix}-{unique}": shown for suffix, _, shown in CLASSES}
    documents = [
        {
            "apiVersion": "gpu.deckhouse.io/v1alpha1",
            "kind": "GPUClass",
            "metadata": {"name": name},
            "spec": spec,
        }
        for name, (_, spec, _) in zip(names, CLASSES, strict=True)
    ]
    control_plane.kubectl("create", "-f", "-", input_text=yaml.safe_dump_all(documents))
    try:
        yield names
    finally:
        control_plane.kubectl("delete", "gpuclass", *names, "--wait=false", check=False)


def test_every_class_shows_its_strategy(control_plane: ControlPlane, classes: dict[str, str]) -> None:
    table = control_plane.kubectl("get", "gpuclasses", *classes)
    header, *rows = table.splitlines()
    column = header.split().index("STRATEGY")
    shown = {row.split()[0]: row.split()[column] for row in rows}
    assert shown == classes


def test_the_stored_class_carries_the_defaulted_sharing(
    control_plane: ControlPlane, classes: dict[str, str]
) -> None:
    """What a script reads with ``-o jsonpath`` is what the column shows: the default is stored."""
    for name, strategy in classes.items():
        stored = control_plane.kubectl("get", "gpuclass", name, "-o", "jsonpath={.spec.sharing.strategy}")
        assert stored == strategy
