"""Makes the allocator tests' builders (``alloc_builders``) importable for the explain tests."""

from __future__ import annotations

import sys
from pathlib import Path

_ALLOCATOR = str(Path(__file__).resolve().parent.parent / "allocator")
if _ALLOCATOR not in sys.path:
    sys.path.insert(0, _ALLOCATOR)
