"""The manager: runs informers and controllers, elects a leader over a Lease, serves /metrics,
/healthz and /readyz."""
