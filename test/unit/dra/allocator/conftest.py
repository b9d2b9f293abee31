"""Makes ``alloc_builders`` (the slice/class/claim builders beside this file) importable.

pytest runs with ``--import-mode=importlib``, which does not put test folders on ``sys.path``;
the allocator tests share one builder module, so this folder is added once, here.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
