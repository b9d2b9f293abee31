"""Semantic versions as Kubernetes CEL's semver library sees them (blang/semver v4).

``semver("1.2.3")`` parses strictly (three numeric parts without leading zeros, optional
pre-release and build metadata); ``semver("v1.2", true)`` first normalises (drops a leading ``v``,
leading zeros, fills missing minor/patch with 0). Ordering follows SemVer 2.0.0 precedence:
numeric parts, then a release sorts after any of its pre-releases, pre-release identifiers compare
numerically when both are numeric and numeric ones sort first. Build metadata never takes part in
ordering or equality, which is why :meth:`Semver.canonical` omits it.
"""

from __future__ import annotations

import functools
import re

_NUM = r"0|[1-9]\d*"
_PRE_ID = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_PATTERN = re.compile(
    rf"({_NUM})\.({_NUM})\.({_NUM})"
    rf"(?:-({_PRE_ID}(?:\.{_PRE_ID})*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?",
    re.ASCII,  # blang/semver reads ASCII digits only
)
_UINT64_MAX = 2**64 - 1


class SemverError(ValueError):
    """The text is not a semantic version."""


class Semver:
    __slots__ = ("build", "major", "minor", "patch", "pre")

    def __init__(
        self, major: int, minor: int, patch: int, pre: tuple[str, ...] = (), build: str = ""
    ) -> None:
        self.major = major
        self.minor = minor
        self.patch = patch
        self.pre = pre
        self.build = build

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        # A release (no pre-release) sorts after every pre-release of the same version.
        pre_key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre_key)

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash(self._key())

    def canonical(self) -> str:
        """The version without build metadata: equal versions have equal canonical strings."""
        text = f"{self.major}.{self.minor}.{self.patch}"
        return f"{text}-{'.'.join(self.pre)}" if self.pre else text

    def __str__(self) -> str:
        return f"{self.canonical()}+{self.build}" if self.build else self.canonical()

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"


def parse_semver(text: str) -> Semver:
    """Parse strictly; raises :class:`SemverError`. Short texts are cached."""
    return _parse_cached(text) if len(text) <= 64 else _parse(text)


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str) -> Semver:
    return _parse(text)


def _parse(text: str) -> Semver:
    match = _PATTERN.fullmatch(text)
    if match is None:
        raise SemverError(f"invalid semantic version {_shown(text)}")
    major, minor, patch, pre, build = match.groups()
    pre_ids = tuple(pre.split(".")) if pre else ()
    # Numbers are unsigned 64-bit in blang/semver: a longer one is an error, not a big integer.
    for number in (major, minor, patch, *(p for p in pre_ids if p.isdigit())):
        if len(number) > 20 or int(number) > _UINT64_MAX:
            raise SemverError(f"invalid semantic version {_shown(text)}: {_shown(number)} is out of range")
    return Semver(int(major), int(minor), int(patch), pre_ids, build or "")


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 80 else f"{text[:40]!r}... ({len(text)} characters)"


def normalize_and_parse(text: str) -> Semver:
    """``semver(text, true)``: tolerate ``v1.2``, ``01.02.03`` and short versions."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or not stripped[0].isdigit():
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def is_semver(text: str, *, normalize: bool = False) -> bool:
    try:
        normalize_and_parse(text) if normalize else parse_semver(text)
    except SemverError:
        return False
    return True
