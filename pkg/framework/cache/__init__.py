"""The informer machinery: reflector (list + watch + resume) -> store (with indexes) -> shared
informer (listener fan-out on a dispatch thread) -> informer factory (one informer per watch)."""
