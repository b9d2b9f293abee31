"""Typed API errors.

Controllers branch on *why* a call failed (a conflict is requeued at once, a 410 forces a re-list,
a 404 during delete is success), so the HTTP status of the official client's ``ApiException`` is
turned into one exception class per reason that callers can catch by name.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException


class ApiError(Exception):
    """An error answered by the API server, with its HTTP status and Status reason."""

    def __init__(self, *, status: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}


class NotFoundError(ApiError):
    """404: the object (or its kind) does not exist."""


class ConflictError(ApiError):
    """409 Conflict: the resourceVersion we wrote from is stale; re-read and retry."""


class AlreadyExistsError(ApiError):
    """409 AlreadyExists: a create found an object of that name."""


class GoneError(ApiError):
    """410 Gone / Expired: the resourceVersion was compacted away; list again."""


class InvalidError(ApiError):
    """422 Invalid: the server's validation rejected the object."""


def _status_body(body: Any) -> dict[str, Any]:
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str) and body:
        try:
            parsed = json.loads(body)
        except ValueError:
            return {"message": body}
        return parsed if isinstance(parsed, dict) else {"message": body}
    return body if isinstance(body, dict) else {}


def error_from_status(status: int, body: Any) -> ApiError:
    """Builds the typed error for an HTTP status and a ``metav1.Status`` body (dict, str or bytes)."""
    parsed = _status_body(body)
    reason = str(parsed.get("reason") or "")
    message = str(parsed.get("message") or reason or f"HTTP {status}")
    details = parsed.get("details") if isinstance(parsed.get("details"), dict) else None
    cls: type[ApiError] = ApiError
    if status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = AlreadyExistsError if reason == "AlreadyExists" else ConflictError
    elif status == 410 or reason in ("Expired", "Gone"):
        cls = GoneError
    elif status == 422:
        cls = InvalidError
    return cls(status=status, reason=reason, message=message, details=details)


def from_api_exception(exc: ApiException) -> ApiError:
    """Translates the official client's exception into our typed error."""
    return error_from_status(int(exc.status or 0), exc.body)
