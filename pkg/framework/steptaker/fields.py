"""The caller's log fields, checked once before anything is taken.

The runner logs every step with the caller's ``log_fields`` as ``extra`` (the claim, the node, the
request: whatever lets a reader find the lines of one operation), plus its own fields. ``logging``
raises ``KeyError`` when an ``extra`` key names an attribute every ``LogRecord`` has (``name``,
``msg``, ``args``, ``message``...), and it would raise it from inside the run, after some steps took
effect and before the runner could undo them. So the fields are checked up front and a bad one is
refused with :class:`ValueError` before the first step: a caller's mistake, found by its first test.

The runner's own fields (``pipeline``, ``step``, ``outcome``, ``seconds``...) are written after the
caller's, so they win over a caller field of the same name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

# Attributes every LogRecord has; an ``extra`` key among them makes ``logging`` raise.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def checked_fields(log_fields: Mapping[str, object] | None) -> dict[str, object]:
    """A copy of ``log_fields`` (empty for None); ValueError if a key would clash with ``logging``."""
    fields = dict(log_fields or {})
    clashes = sorted(set(fields) & _RECORD_ATTRIBUTES)
    if clashes:
        raise ValueError(f"log fields {clashes} are LogRecord attributes; rename them")
    return fields


__all__ = ["checked_fields"]
