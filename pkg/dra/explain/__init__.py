"""``gpu-dra-controller explain``: why a claim gets the devices it gets, or none.

``bundle`` reads the objects from a multi-document YAML file (no cluster needed), ``cluster``
reads them from the API server, ``render`` prints the allocator's explanation, ``cli`` ties them
together with exit codes: 0 allocatable, 1 not allocatable, 2 bad input.
"""
