"""Dynamic Resource Allocation for GPUs: the allocator library, and later the publisher and prepare.

``pkg.dra.allocator`` holds the allocation logic (no I/O); ``pkg.dra.domain`` its result
types. Controllers and CLIs import these and own every API call.
"""
