"""Makes the allocator tests' builders (``alloc_builders``) importable here too.

gpu-dra-controller's tests build slices, classes and claims exactly like the allocator's, so
they reuse that module rather than copying it; ``dra_controller_fakes`` beside this file adds
the fake API server, stores and recorder.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for folder in (_HERE, _HERE.parent / "dra" / "allocator"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
