"""Request bodies go out as compact JSON with sorted keys (the API server keeps opaque parameters as sent)."""

from __future__ import annotations

import json

from pkg.framework.client.compact_body import encode


def test_objects_are_encoded_without_insignificant_whitespace_and_with_sorted_keys() -> None:
    body = {"spec": {"parameters": {"kind": "GpuConfig", "sharing": {"strategy": "MPS"}}}, "list": [1, 2]}
    sent = encode(body)
    assert sent == b'{"list":[1,2],"spec":{"parameters":{"kind":"GpuConfig","sharing":{"strategy":"MPS"}}}}'
    assert json.loads(sent) == body


def test_text_is_sent_as_utf8_and_bytes_as_they_are() -> None:
    assert encode({"name": "gpü"}) == '{"name":"gpü"}'.encode()
    assert encode('{"a": 1}') == b'{"a": 1}'
    assert encode(b'{"a":  1}') == b'{"a":  1}'
