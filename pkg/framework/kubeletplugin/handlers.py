"""gRPC handlers for a service, built from its descriptor and typed Python callables.

grpc's generated servicer classes are untyped and would tie each service to inheritance; instead
each of our services is a plain class whose methods are registered here by name. The request and
response types, the method paths and whether a method streams all come from the service's
descriptor in the generated ``_pb2`` module, so they cannot disagree with the .proto file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message_factory import GetMessageClass

Implementation = Callable[[Any, grpc.ServicerContext], Any]


def service_handler(
    service: ServiceDescriptor, methods: Mapping[str, Implementation]
) -> grpc.GenericRpcHandler:
    """A handler serving every method of ``service`` with the callable of the same name."""
    missing = {m.name for m in service.methods} - set(methods)
    unknown = set(methods) - {m.name for m in service.methods}
    if missing or unknown:
        raise ValueError(f"{service.full_name}: missing {sorted(missing)}, unknown {sorted(unknown)}")
    handlers = {}
    for method in service.methods:
        request = GetMessageClass(method.input_type)
        response = GetMessageClass(method.output_type)
        make = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = make(
            methods[method.name],
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)
