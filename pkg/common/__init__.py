"""Building blocks shared by the controllers and the node agent (pipelines, builders, helpers)."""
