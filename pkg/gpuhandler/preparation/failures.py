"""Why a claim's preparation failed, as a word a metric can carry and a sentence a person can read.

Steps raise :class:`PrepareFailedError` with a CamelCase ``reason``; errors from below (the backend's
:class:`~pkg.backends.preparation.PreparationError`, an unreadable checkpoint, the node lock) are
mapped to one by :func:`reason_of`, so the ``reason`` label never depends on message text.
"""

from __future__ import annotations

from pkg.backends.backend import BackendError
from pkg.framework.client import ApiError
from pkg.gpuhandler.node_lock import NodeLockTimeoutError
from pkg.gpuhandler.preparation.checkpoint import CheckpointError


class PrepareFailedError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def reason_of(error: BaseException) -> str:
    if isinstance(error, PrepareFailedError | BackendError):
        return error.reason
    if isinstance(error, CheckpointError):
        return "CheckpointUnreadable"
    if isinstance(error, NodeLockTimeoutError):
        return "NodeLockTimeout"
    if isinstance(error, ApiError):
        return "ApiError"
    if isinstance(error, OSError):
        return "HostError"
    return "InternalError"
