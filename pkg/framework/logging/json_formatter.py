"""One JSON object per log line.

Log collectors (and ``jq``) parse lines, not prose, so every record becomes a flat object:
``time`` (RFC 3339, UTC, milliseconds), ``level``, ``logger``, ``msg``, then every field passed
through ``extra=`` (the structured context: object names, controller, durations), then the
exception text. Level names follow the deckhouse log package (``debug``, ``info``, ``warn``,
``error``, ``fatal``) so our lines look like the rest of the platform's.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

_LEVEL_NAMES = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warn",
    logging.ERROR: "error",
    logging.CRITICAL: "fatal",
}


def level_name(levelno: int) -> str:
    """The deckhouse name of a level; a custom level (e.g. 5) is named by the next standard one."""
    for threshold in sorted(_LEVEL_NAMES):
        if levelno <= threshold:
            return _LEVEL_NAMES[threshold]
    return "fatal"


def rfc3339_millis(created: float) -> str:
    """``2025-01-02T03:04:05.678Z`` for a ``time.time()`` value."""
    moment = datetime.fromtimestamp(created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """Formats records as single-line JSON; values JSON cannot hold are rendered with ``str``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": rfc3339_millis(record.created),
            "level": level_name(record.levelno),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)
