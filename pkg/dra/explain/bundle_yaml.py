"""Reading a bundle's YAML within bounds: size, encoding, nesting and alias expansion.

A bundle is whatever someone hands the explain command, so reading it must end — with the
documents or with an error naming the file and the place — in time and memory bounded by the
file's size, whatever it holds:

* **size**: at most :data:`MAX_BUNDLE_BYTES`, read through one bounded ``read`` (a FIFO or a
  growing file cannot make it read forever), and no object larger than
  :data:`MAX_OBJECT_BYTES`, the API server's limit on a request body (``--max-request-body-bytes``,
  3 MiB): no object that large was ever stored, so one in a bundle is not a cluster's;
* **encoding**: UTF-8, as YAML 1.2 and the API server require; anything else is an error at its
  byte offset, not a traceback;
* **nesting**: at most :data:`MAX_DEPTH` levels (the deepest path of the kinds we read, e.g.
  ``items[].spec.devices[].nodeSelector.nodeSelectorTerms[].matchExpressions[].values[]``, is
  below 15); deeper input would otherwise exhaust the recursion of the composer and constructor;
* **aliases**: go-yaml's rule (``allowedAliasRatio``, the fix of CVE-2019-11253 that kubectl and
  the API server rely on through ``sigs.k8s.io/yaml``): a document whose alias expansions make up
  more than 99% of its nodes (below 400,000 nodes; 10% from 4,000,000 on) is refused — so an alias
  bomb fails after a few thousand nodes instead of expanding to billions when the objects are
  validated or printed.

All of this is checked on libyaml's event stream (``yaml.CSafeLoader``: the C parser, about ten
times faster than the pure-Python one) before a single Python object is built; only then is the
text composed and constructed, by the same C loader.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAX_BUNDLE_BYTES = 64 * 1024 * 1024
MAX_OBJECT_BYTES = 3 * 1024 * 1024  # the API server's --max-request-body-bytes default
MAX_DEPTH = 100
_ALIAS_RATIO_LOW, _ALIAS_RATIO_HIGH = 400_000, 4_000_000  # go-yaml alias_ratio_range_low/high


class BundleYamlError(Exception):
    """The file cannot be read as bounded YAML; the message names the file and the place."""


def read_text(path: Path) -> str:
    """The file's text: at most :data:`MAX_BUNDLE_BYTES`, strictly UTF-8."""
    try:
        # Non-blocking open: a FIFO without a writer must not hang the command.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise BundleYamlError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise BundleYamlError(f"{path}: is a directory, not a YAML file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(MAX_BUNDLE_BYTES + 1)
    except OSError as err:
        raise BundleYamlError(f"{path}: cannot read: {err.strerror or err}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleYamlError(f"{path}: larger than the limit of {MAX_BUNDLE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise BundleYamlError(
            f"{path}: not UTF-8: byte {err.start} (line {line}) is {data[err.start : err.start + 1]!r}"
        ) from None


def load_documents(path: Path, text: str) -> list[Any]:
    """The documents of ``text`` (read from ``path``), after :func:`check_events` passed."""
    check_events(path, text)
    try:
        return list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as err:
        raise BundleYamlError(f"{path}: not valid YAML: {err}") from None
    except (RecursionError, MemoryError) as err:  # bounded above; kept as a last line of defence
        raise BundleYamlError(f"{path}: too complex to read: {type(err).__name__}") from None


@dataclass
class _Collection:
    start: int  # character offset where the node starts
    nodes: int = 0  # nodes inside it, aliases expanded
    anchor: str | None = None
    is_mapping: bool = False
    expect_key: bool = True  # mappings alternate key, value
    key: str | None = None  # the last key scalar of a mapping
    is_object: bool = False  # a Kubernetes object (a document's root, or an item of a List)
    holds_items: bool = False  # an object with an ``items`` sequence: a List, not one object
    children_are_objects: bool = False  # the document itself, or a List's ``items``


@dataclass
class _Counts:
    decoded: int = 0
    aliased: int = 0
    anchors: dict[str, int] = field(default_factory=dict)


def check_events(path: Path, text: str) -> None:
    """Raises :class:`BundleYamlError` when ``text`` breaks a limit; see the module docstring."""
    counts = _Counts()
    stack: list[_Collection] = []
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            _step(path, text, event, stack, counts)
    except yaml.YAMLError as err:
        raise BundleYamlError(f"{path}: not valid YAML: {err}") from None


def _step(path: Path, text: str, event: yaml.Event, stack: list[_Collection], counts: _Counts) -> None:
    where = _where(path, event.start_mark)
    if isinstance(event, yaml.DocumentStartEvent):
        stack[:] = [_Collection(start=0, children_are_objects=True)]  # the document itself
    elif isinstance(event, yaml.AliasEvent):
        size = counts.anchors.get(event.anchor or "")
        if size is None:
            raise BundleYamlError(f"{where}: unknown anchor {event.anchor!r}")
        counts.decoded += size
        counts.aliased += size
        _check_aliasing(where, counts)
        _ended(stack, size, None)
    elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
        counts.decoded += 1
        _check_aliasing(where, counts)
        if len(stack) > MAX_DEPTH:
            raise BundleYamlError(f"{where}: nested deeper than {MAX_DEPTH} levels")
        stack.append(_opened(stack, event))
    elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
        done = stack.pop()
        if done.anchor:
            counts.anchors[done.anchor] = done.nodes + 1
        if done.is_object and not done.holds_items and _larger_than_a_request(text, done.start, event):
            raise BundleYamlError(
                f"{where}: the object ending here is larger than {MAX_OBJECT_BYTES} bytes, the API "
                "server's limit on a request"
            )
        _ended(stack, done.nodes + 1, None)
    elif isinstance(event, yaml.ScalarEvent):
        counts.decoded += 1
        _check_aliasing(where, counts)
        if event.anchor:
            counts.anchors[event.anchor] = 1
        _ended(stack, 1, event.value)


def _larger_than_a_request(text: str, start: int, end: yaml.Event) -> bool:
    """Whether the YAML of an object, from ``start`` to ``end``, exceeds :data:`MAX_OBJECT_BYTES`
    in UTF-8. Marks count characters, and a character is 1 to 4 bytes, so only a span between a
    quarter of the limit and the limit is encoded to be measured."""
    chars = _index(end.end_mark) - start
    if chars > MAX_OBJECT_BYTES:
        return True
    if chars * 4 <= MAX_OBJECT_BYTES:
        return False
    return len(text[start : start + chars].encode()) > MAX_OBJECT_BYTES


def _index(mark: Any) -> int:
    return int(mark.index) if mark is not None else 0


def _opened(stack: list[_Collection], event: yaml.CollectionStartEvent) -> _Collection:
    parent = stack[-1] if stack else None
    opened = _Collection(
        start=_index(event.start_mark),
        anchor=event.anchor,
        is_mapping=isinstance(event, yaml.MappingStartEvent),
        is_object=parent is not None and parent.children_are_objects,
    )
    if (
        parent is not None
        and parent.is_object
        and parent.is_mapping
        and not parent.expect_key
        and parent.key == "items"
        and isinstance(event, yaml.SequenceStartEvent)
    ):
        opened.children_are_objects = True
        parent.holds_items = True
    return opened


def _ended(stack: list[_Collection], nodes: int, scalar: str | None) -> None:
    """A node of ``nodes`` nodes ended inside the innermost open collection."""
    if not stack:
        return
    top = stack[-1]
    top.nodes += nodes
    if top.is_mapping:  # mappings alternate key and value
        if top.expect_key:
            top.key = scalar
        top.expect_key = not top.expect_key


def _check_aliasing(where: str, counts: _Counts) -> None:
    ratio = counts.aliased / counts.decoded if counts.decoded else 0.0
    if counts.aliased > 100 and counts.decoded > 1000 and ratio > _allowed_alias_ratio(counts.decoded):
        raise BundleYamlError(
            f"{where}: document contains excessive aliasing ({counts.aliased} of {counts.decoded} "
            "nodes come from aliases)"
        )


def _allowed_alias_ratio(decoded: int) -> float:
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def _where(path: Path, mark: Any) -> str:
    return f"{path}: line {mark.line + 1}, column {mark.column + 1}"
