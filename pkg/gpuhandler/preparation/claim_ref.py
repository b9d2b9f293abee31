"""A claim's identity checked the way the API server checks it, before any of it reaches a path.

A claim's UID names its CDI spec file and its VM metadata folder, its name and its requests name
paths inside its containers. The API server only ever hands out UIDs of the UUID format and names
of the DNS-1123 forms, so anything else (``../../etc/x``, ``a/b``, an empty string, a NUL) did not
come from it: it is refused here, never turned into a path. :func:`validate_claim_ref` is what
Prepare and Unprepare call on entry; :func:`checked_uid` is what every function that builds a
path from a UID calls.
"""

from __future__ import annotations

import re
from typing import Final

from pkg.gpuhandler.preparation.failures import PrepareFailedError

# The API server's UIDs (k8s.io/apimachinery types.UID from uuid.NewUUID): 8-4-4-4-12 hex digits.
_UID: Final = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# DNS-1123 label (namespaces, request names) and subdomain (object names).
_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_MAX: Final = 63
SUBDOMAIN_MAX: Final = 253


class InvalidClaimRefError(ValueError):
    """A UID, name or namespace the API server would never have produced."""


def checked_uid(uid: object) -> str:
    """``uid`` if it is a UID of the API server's format; :class:`InvalidClaimRefError` otherwise."""
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        raise InvalidClaimRefError(f"{_shown(uid)} is not a claim UID (8-4-4-4-12 hexadecimal digits)")
    return uid


def checked_label(value: object, what: str) -> str:
    """``value`` if it is a DNS-1123 label (namespaces, request names)."""
    if not isinstance(value, str) or len(value) > LABEL_MAX or not _LABEL.fullmatch(value):
        raise InvalidClaimRefError(f"{what} {_shown(value)} is not a DNS-1123 label")
    return value


def checked_subdomain(value: object, what: str) -> str:
    """``value`` if it is a DNS-1123 subdomain (object names)."""
    if not isinstance(value, str) or len(value) > SUBDOMAIN_MAX or not _SUBDOMAIN.fullmatch(value):
        raise InvalidClaimRefError(f"{what} {_shown(value)} is not a DNS-1123 subdomain")
    return value


def check_ref(uid: object, namespace: object, name: object) -> None:
    """:class:`InvalidClaimRefError` unless all three are of the API server's forms."""
    checked_uid(uid)
    checked_label(namespace, "namespace")
    checked_subdomain(name, "name")


def validate_claim_ref(claim: object) -> None:
    """Prepare's and Unprepare's entry check: ``claim`` (anything with ``uid``, ``namespace`` and
    ``name``, or with ``metadata`` holding them: a ResourceClaim, the kubelet's claim reference, a
    checkpoint record) names a claim the API server could have made; else
    ``PrepareFailedError("InvalidClaim", ...)``, before any of it touches a path."""
    meta = getattr(claim, "metadata", None) if not hasattr(claim, "uid") else claim
    uid = getattr(meta, "uid", None)
    namespace = getattr(meta, "namespace", None)
    name = getattr(meta, "name", None)
    try:
        check_ref(uid, namespace, name)
    except InvalidClaimRefError as exc:
        raise PrepareFailedError(
            "InvalidClaim", f"claim {_shown(namespace)}/{_shown(name)} ({_shown(uid)}): {exc}"
        ) from None


def _shown(value: object) -> str:
    """``value`` for a message: quoted, escaped (a NUL or a newline shows as such) and shortened."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
