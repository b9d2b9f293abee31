"""Decoding a watch stream: one JSON event per line, ERROR events turned into typed errors.

Kept apart from the client so the framing rules (partial chunks, a final line without a newline,
bookmarks carrying only a resourceVersion) are testable without a server.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pkg.framework.client.errors import error_from_status


class WatchEventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"


@dataclass(frozen=True)
class WatchEvent:
    """One watch event. ``raw`` is the object's JSON; bookmarks carry only a resourceVersion."""

    type: WatchEventType
    resource_version: str
    raw: dict[str, Any]


class WatchStreamClosedError(Exception):
    """The watch connection ended without an answer (read timeout or a broken stream)."""


def decode_watch_stream(response: Any) -> Iterator[WatchEvent]:
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield _decode_watch_line(line)
    if buffer.strip():
        yield _decode_watch_line(buffer)


def _decode_watch_line(line: bytes) -> WatchEvent:
    event = json.loads(line)
    obj = event.get("object") or {}
    if event.get("type") == "ERROR":
        raise error_from_status(int(obj.get("code") or 500), obj)
    resource_version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return WatchEvent(type=WatchEventType(event["type"]), resource_version=resource_version, raw=obj)
