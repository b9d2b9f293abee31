"""The API server's validation of a ResourceClaim's requests, for claims read from a bundle.

A claim from the cluster was validated when it was written; one from a bundle was not, and the
allocator takes its requests as the API guarantees them. So a bundle's claim is checked here by
the rules of ``k8s.io/kubernetes/pkg/apis/resource/validation`` that decide what the allocator
sees, and a violation is reported in the API server's own words (field path, then
``Invalid value``, ``Required value``, ``Unsupported value``, ``Duplicate value`` or
``Too many``), so the explain command fails the way ``kubectl apply`` would. The integration test
submits the same claims to a real API server and compares the messages.

Defaulting is the API's too, checked against a real server: an ``ExactCount`` request without a
count, or with ``count: 0`` (the zero value, indistinguishable from "unset" on the wire), gets one
device; a claim without ``spec`` is valid and asks for nothing.
"""

from __future__ import annotations

import re

from kubernetes.client import ResourceV1ResourceClaim

MAX_REQUESTS = 32  # DeviceRequestsMaxSize
MAX_SUBREQUESTS = 8  # FirstAvailableDeviceRequestMaxSize
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_MODES = ("All", "ExactCount")
_NO_COUNT_WITH_ALL = "must not be specified when allocationMode is 'All'"


def claim_errors(claim: ResourceV1ResourceClaim) -> list[str]:
    """The API server's errors for ``claim``'s requests (empty when it would be accepted)."""
    devices = claim.spec.devices if claim.spec is not None else None
    requests = (devices.requests if devices is not None else None) or []
    errors: list[str] = []
    path = "spec.devices.requests"
    if len(requests) > MAX_REQUESTS:
        errors.append(f"{path}: Too many: {len(requests)}: must have at most {MAX_REQUESTS} items")
    seen: set[str] = set()
    for index, request in enumerate(requests):
        at = f"{path}[{index}]"
        errors += _name(at, request.name, seen)
        if (request.exactly is None) == (not request.first_available):
            errors.append(f"{at}: Required value: exactly one of `exactly` or `firstAvailable` is required")
            continue
        if request.exactly is not None:
            errors += _request(f"{at}.exactly", request.exactly)
            continue
        subrequests = request.first_available or []
        if len(subrequests) > MAX_SUBREQUESTS:
            many = len(subrequests)
            errors.append(f"{at}.firstAvailable: Too many: {many}: must have at most {MAX_SUBREQUESTS} items")
        sub_seen: set[str] = set()
        for sub_index, sub in enumerate(subrequests):
            sub_at = f"{at}.firstAvailable[{sub_index}]"
            errors += _name(sub_at, sub.name, sub_seen)
            errors += _request(sub_at, sub)
    return errors


def _name(at: str, name: str | None, seen: set[str]) -> list[str]:
    if not name:
        return [f"{at}.name: Required value"]
    if len(name) > 63:
        return [f"{at}.name: Invalid value: {_quoted(name)}: must be no more than 63 characters"]
    if not _DNS_LABEL.fullmatch(name):
        return [f"{at}.name: Invalid value: {_quoted(name)}: {_DNS_LABEL_MESSAGE}"]
    if name in seen:
        # The API prints the whole duplicate request; its name is what identifies it.
        return [f'{at}: Duplicate value: {{"name":{_quoted(name)},...}}']
    seen.add(name)
    return []


def _request(at: str, request: object) -> list[str]:
    """``exactly`` or one ``firstAvailable`` entry: class, allocation mode and count."""
    errors = []
    if not getattr(request, "device_class_name", None):
        errors.append(f"{at}.deviceClassName: Required value")
    mode = getattr(request, "allocation_mode", None) or "ExactCount"
    count = getattr(request, "count", None)
    if mode not in _MODES:
        supported = "supported values: " + ", ".join(f'"{m}"' for m in _MODES)
        errors.append(f"{at}.allocationMode: Unsupported value: {_quoted(mode)}: {supported}")
    elif mode == "All" and count:
        errors.append(f"{at}.count: Invalid value: {count}: {_NO_COUNT_WITH_ALL}")
    elif mode == "ExactCount" and count is not None and count < 0:
        errors.append(f"{at}.count: Invalid value: {count}: must be greater than zero")
    return errors


def _quoted(text: str) -> str:
    shown = text if len(text) <= 100 else text[:100] + "..."
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'


__all__ = ["MAX_REQUESTS", "MAX_SUBREQUESTS", "claim_errors"]
