"""Internals of gpu-node-agent: state, services, handlers and triggers (spec §10.4 layout)."""
