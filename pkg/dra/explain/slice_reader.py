"""ResourceSlices for ``explain``, read page by page and decoded once per distinct part.

Why not the client's list: decoding a ResourceSlice validates every device as a tree of the
client's pydantic models — about 160 µs a device, and a 1,000-node cluster of 8 H100 publishes
224,000 of them (209 MB of JSON): two minutes before the allocator sees one device. Yet the
devices of a cluster are few kinds repeated: the same attribute values (``deviceType: MIG``, a
profile name, ``vendor``), the same capacities and the same counter consumptions on every card of a
model, on every server of a kind.

So each slice is decoded in parts, and each distinct part once:

* the slice without its devices is validated whole (metadata, pool, node selection, counters);
* a device's attribute, capacity and counter-consumption values are validated once per distinct
  JSON value and the resulting model is shared by every device that carries that value (the
  gpu-dra-controller's cache shares them the same way, ``slice_interning``; nothing mutates them);
* what remains of a device (its name; taints, node selection and binding fields when present) is
  validated once per distinct shape, the name checked for each device.

The device is then assembled from already-validated parts (``model_construct``), so it is the model
the client would have decoded, field for field — what the allocator reads, its own pool form built
by its own rules. Validation is not skipped: every distinct value went through the client's model
once, so a malformed slice is refused with the model's message, naming the slice and the device.

Memory stays bounded by the result: the API is read in pages (``limit``/``continue``) of raw JSON,
parsed with pydantic-core's parser and dropped page by page, and shared parts cost once.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from kubernetes.client import (
    V1Device,
    V1DeviceAttribute,
    V1DeviceCapacity,
    V1DeviceCounterConsumption,
    V1ResourceSlice,
)
from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE

PAGE_SIZE = 100  # slices per page: a page of 1,000-node slices is a few MB of JSON
MAX_SHARED = 200_000  # distinct parts remembered; past that the table starts again (sharing only)

_PARTS = {"attributes", "capacity", "consumesCounters"}


class SliceReadError(Exception):
    """A ResourceSlice could not be read; the message names the slice (and device) and the reason."""


class SliceDecoder:
    """Decodes raw ResourceSlices (the API's JSON form) into the client's models, each distinct
    part validated once (see the module docs). Not thread-safe: one reader, one decoder."""

    def __init__(self, *, max_shared: int = MAX_SHARED) -> None:
        self._shared: dict[object, Any] = {}
        self._max = max_shared

    def decode(self, raw: object) -> V1ResourceSlice:
        """One slice from its JSON form; raises :class:`SliceReadError` naming it. ``raw`` is
        consumed (its devices lose their names): a page is decoded once and dropped."""
        if not isinstance(raw, dict):
            raise SliceReadError(f"ResourceSlice: expected an object, got {type(raw).__name__}")
        name = _name(raw)
        spec = raw.get("spec")
        devices = spec.get("devices") if isinstance(spec, dict) else None
        if devices is not None and not isinstance(devices, list):
            raise SliceReadError(
                f"ResourceSlice {name}: spec.devices is a {type(devices).__name__}, not a list"
            )
        shell = raw
        if devices and isinstance(spec, dict):
            shell = {**raw, "spec": {k: v for k, v in spec.items() if k != "devices"}}
        rs: V1ResourceSlice = _validate(V1ResourceSlice, shell, f"ResourceSlice {name}")
        if devices:
            if len(self._shared) > self._max:
                self._shared.clear()
            # Set past validate_assignment: the devices are validated part by part above.
            rs.spec.__dict__["devices"] = [self._device(name, i, d) for i, d in enumerate(devices)]
            rs.spec.__pydantic_fields_set__.add("devices")
        return rs

    def _device(self, slice_name: str, index: int, raw: object) -> V1Device:
        where = f"ResourceSlice {slice_name}: spec.devices[{index}]"
        if not isinstance(raw, dict):
            raise SliceReadError(f"{where}: expected an object, got {type(raw).__name__}")
        name = raw.pop("name", None)  # the page is ours: what is left is the device's kind
        if not isinstance(name, str):
            raise SliceReadError(f"{where}: name is {'missing' if name is None else 'not a string'}")
        key = ("device", repr(raw))  # exact for JSON values: 1, 1.0, true and "1" differ
        fields = self._shared.get(key)
        if fields is None:
            where = f"ResourceSlice {slice_name}: device {_short(name)}"
            fields = self._shared[key] = self._fields(raw, name, where)
        device: V1Device = _construct(V1Device, {**fields, "name": name})
        return device

    def _fields(self, raw: dict[str, Any], name: str, where: str) -> dict[str, Any]:
        """A device's fields but its name, each part shared with every device that has it."""
        rest = {k: v for k, v in raw.items() if k not in _PARTS}
        fields = self._rest(rest, name, where) if rest else {}
        attributes = raw.get("attributes")
        if attributes is not None:
            fields["attributes"] = self._map(attributes, V1DeviceAttribute, f"{where}: attributes")
        capacity = raw.get("capacity")
        if capacity is not None:
            fields["capacity"] = self._map(capacity, V1DeviceCapacity, f"{where}: capacity")
        counters = raw.get("consumesCounters")
        if counters is not None:
            if not isinstance(counters, list):
                raise SliceReadError(f"{where}: consumesCounters is not a list")
            fields["consumes_counters"] = [
                self._one(c, V1DeviceCounterConsumption, f"{where}: consumesCounters[{i}]")
                for i, c in enumerate(counters)
            ]
        return fields

    def _rest(self, rest: dict[str, Any], name: str, where: str) -> dict[str, Any]:
        """The device's other fields, validated once per distinct shape."""
        key = ("rest", repr(rest))
        fields = self._shared.get(key)
        if fields is None:
            model = _validate(V1Device, {**rest, "name": name}, where)
            fields = self._shared[key] = {f: getattr(model, f) for f in model.model_fields_set if f != "name"}
        return dict(fields)

    def _map(self, raw: object, model: type[BaseModel], where: str) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise SliceReadError(f"{where}: expected an object, got {type(raw).__name__}")
        return {k: self._one(v, model, f"{where}: {_short(str(k))}") for k, v in raw.items()}

    def _one(self, raw: object, model: type[BaseModel], where: str) -> Any:
        """One part, validated once per distinct JSON value (types included: 1 and true differ)."""
        key = (model, _key(raw))
        value = self._shared.get(key)
        if value is None:
            value = self._shared[key] = _validate(model, raw, where)
        return value


def _key(raw: object) -> object:
    if type(raw) is dict and len(raw) == 1:  # the common case: {"string": "MIG"}, {"value": "80Gi"}
        ((field, value),) = raw.items()
        return (field, value, type(value))
    return repr(raw)


_DEFAULTS: dict[type[Any], dict[str, None]] = {}


def _defaults(model: type[Any]) -> dict[str, None]:
    defaults = _DEFAULTS.get(model)
    if defaults is None:
        defaults = _DEFAULTS[model] = dict.fromkeys(model.model_fields)
    return defaults


def _construct(model: type[Any], fields: dict[str, Any]) -> Any:
    """``model.model_construct(**fields)`` without its per-call overhead: the fields are already
    validated models and values (see the module docs); unset fields take their default, None."""
    obj = object.__new__(model)
    values = dict(_defaults(model))
    values.update(fields)
    object.__setattr__(obj, "__dict__", values)
    object.__setattr__(obj, "__pydantic_fields_set__", set(fields))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def _validate(model: type[Any], raw: object, where: str) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        found = err.errors(include_url=False, include_input=False)
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in found[:5])
        more = f"; and {len(found) - 5} more" if len(found) > 5 else ""
        raise SliceReadError(f"{where} is invalid: {problems}{more}") from None


def _name(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return _short(name) if isinstance(name, str) and name else "<unnamed>"


def _short(text: str) -> str:
    return text if len(text) <= 100 else f"{text[:100]}... ({len(text)} characters)"


@contextmanager
def paused_gc() -> Iterator[None]:
    """CPython's cyclic garbage collector off for a one-shot bulk build, as it was after.

    Why: reading 1,000 nodes' slices makes millions of dicts, lists and models, and every few
    thousand new objects the collector walks the young ones — and now and then every live object,
    which grows to all of them. Measured on the 1,000-node bench, parsing the pages took 4.9 s
    with the collector and 2.1 s without. Nothing built here is garbage in a cycle worth collecting
    early (reference counting frees the pages), so the one-shot commands pause it; a long-running
    process settles its heap instead (``Allocator.settle_heap``).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_slices(kube: KubeClient, *, page_size: int = PAGE_SIZE) -> list[V1ResourceSlice]:
    """Every ResourceSlice of one consistent snapshot (the pages of one list), decoded by parts."""
    decoder = SliceDecoder()
    with paused_gc():
        return [decoder.decode(raw) for raw in _pages(kube, page_size)]


def _pages(kube: KubeClient, page_size: int) -> Iterator[object]:
    """The items of every page, the next page requested while this one is decoded.

    Why ahead: producing and sending a page is the API server's work and the socket's wait, during
    which this process would idle; with the request made from one helper thread (the socket read
    releases the GIL), the server works on page n+1 while page n is decoded. At most two pages are
    held, so memory stays bounded by the page size. A failed request raises here, in order.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="slice-pages") as fetcher:

        def request(token: str | None) -> Future[bytes]:
            return fetcher.submit(kube.list_page_json, RESOURCE_SLICE, limit=page_size, continue_token=token)

        pending: Future[bytes] | None = request(None)
        try:
            while pending is not None:
                page = from_json(pending.result())
                if not isinstance(page, dict):
                    raise SliceReadError("ResourceSliceList: expected an object")
                meta = page.get("metadata") or {}
                token = meta.get("continue") if isinstance(meta, dict) else None
                pending = request(token) if token else None
                yield from page.get("items") or ()
                del page  # one page at a time, beside the one in flight
        finally:
            if pending is not None:
                pending.cancel()
