"""Internals of gpu-node-agent: state, services, handlers, watches and the udev source."""
