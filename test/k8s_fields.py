"""Typed reads of the Kubernetes models' optional fields, for tests of every tier.

The client's models declare every field Optional; a test that reads one it relies on asserts it
is set, and these helpers do so and return it typed, so a missing field fails the test with its
name rather than with an AttributeError on None. (``test/`` is on ``sys.path`` through its
conftest, so tests import this module by bare name.)
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from kubernetes.client import V1ObjectMeta

T = TypeVar("T")
S = TypeVar("S", covariant=True)


def present(value: T | None, what: str = "the field") -> T:
    """``value``, which the test expects set."""
    assert value is not None, f"{what} is not set"
    return value


class HasMetadata(Protocol):
    @property
    def metadata(self) -> V1ObjectMeta | None: ...


class HasSpec(Protocol[S]):
    @property
    def spec(self) -> S | None: ...


class HasStatus(Protocol[S]):
    @property
    def status(self) -> S | None: ...


def meta(obj: HasMetadata) -> V1ObjectMeta:
    """The object's metadata."""
    return present(obj.metadata, "metadata")


def name_of(obj: HasMetadata) -> str:
    """metadata.name."""
    return present(meta(obj).name, "metadata.name")


def uid_of(obj: HasMetadata) -> str:
    """metadata.uid."""
    return present(meta(obj).uid, "metadata.uid")


def labels_of(obj: HasMetadata) -> dict[str, str]:
    """metadata.labels, empty when there are none."""
    return dict(meta(obj).labels or {})


def annotations_of(obj: HasMetadata) -> dict[str, str]:
    """metadata.annotations, empty when there are none."""
    return dict(meta(obj).annotations or {})


def spec_of(obj: HasSpec[S]) -> S:
    """The object's spec."""
    return present(obj.spec, "spec")


def status_of(obj: HasStatus[S]) -> S:
    """The object's status."""
    return present(obj.status, "status")
