"""Prometheus metrics of every component and the HTTP server that exposes them."""
