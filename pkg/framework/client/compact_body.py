"""Request bodies sent as compact JSON with sorted keys, the bytes ``kubectl`` sends.

The official client encodes every JSON body with ``json.dumps``' default separators (``", "`` and
``": "``) and the keys in insertion order. For most fields that is only bytes on the wire, but the
API server stores a ``RawExtension`` — a DRA claim's or class's opaque ``parameters``, copied into
the claim's ``status.allocation`` — as the bytes it was sent, and compares a later write's copy
with the stored one byte for byte. The server re-encodes those bytes before it compares: compacted
when it applies a patch, compacted and with sorted keys when it applies a server-side apply (it
goes through a generic map). So a claim whose opaque parameters were stored with spaces refuses
every later JSON write as a change of an immutable field ("spec: field is immutable"), and an
allocation stored with unsorted keys refuses the device status apply ("status.allocation: field
cannot be modified once set"). Compact bytes with sorted keys, what ``kubectl`` sends (it converts
through a map), survive both; every object we create or write is sent so.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse


def encode(body: Any) -> bytes:
    """``body`` as compact JSON with sorted keys; bytes and text are taken as already encoded."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def send(
    api: ApiClient,
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    body: Any,
    timeout: float | tuple[float, float],
) -> RESTResponse:
    """One request with a body, through ``api``'s connection pool (its TLS, proxy and auth headers,
    which ``param_serialize`` already put in ``headers``), as ``ApiClient.call_api`` would send it but
    for the body's encoding. Not retried here: callers decide, as for every other request."""
    limit = (
        urllib3.Timeout(connect=timeout[0], read=timeout[1])
        if isinstance(timeout, tuple)
        else urllib3.Timeout(total=timeout)
    )
    try:
        response = api.rest_client.pool_manager.request(
            method, url, body=encode(body), headers=headers, timeout=limit, preload_content=False
        )
    except urllib3.exceptions.SSLError as exc:
        raise ApiException(status=0, reason=f"{type(exc).__name__}\n{exc}") from exc
    return RESTResponse(response)
