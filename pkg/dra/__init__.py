"""Dynamic Resource Allocation for GPUs, as libraries the components use.

``pkg.dra.model``: cards, offers, slice layout and API limits (pure); ``pkg.dra.allocator``: the
allocation logic with Kubernetes' semantics (no I/O) and its typed failures; ``pkg.dra.publisher``:
a node's pool by server-side apply; ``pkg.dra.explain``: why a claim gets what it gets.
Controllers and CLIs import these and own the watches and the scheduling of calls.
"""
