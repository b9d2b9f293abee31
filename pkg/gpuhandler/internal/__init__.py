"""Internals of the gpu-handler's enrichment: state, handlers, services, watch predicates."""
