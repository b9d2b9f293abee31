"""One rule for a test whose tool or host package is missing: skip by hand, fail under make.

Run by hand, a test that needs runc or busybox on a machine without them is skipped, saying what
installs them. The Makefile's test targets install every tool and host package first and set
``GPU_CP_REQUIRE_TOOLS=1``: there a missing one means the set-up path is broken, and a skip would
hide that (a fresh machine once passed ``make test`` with a dozen of the unit tier's container
tests skipped). Hardware the machine lacks (an NVIDIA GPU) and privileges (root) are not tools:
those stay plain skips.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REQUIRE_TOOLS = "GPU_CP_REQUIRE_TOOLS"


def tools_required() -> bool:
    """Whether this run promised every tool (``make test*`` sets :data:`REQUIRE_TOOLS`)."""
    return os.environ.get(REQUIRE_TOOLS, "") == "1"


def require(present: bool, missing: str) -> None:
    """Go on when ``present``; else fail (tools promised) or skip, with ``missing`` as the reason."""
    if present:
        return
    if tools_required():
        pytest.fail(f"{missing}; {REQUIRE_TOOLS}=1 says the test targets installed it", pytrace=False)
    pytest.skip(missing)


def require_program(name: str, hint: str) -> Path:
    """The program ``name`` on ``PATH``, as :func:`require` treats a missing one; ``hint`` says
    what installs it."""
    found = shutil.which(name)
    require(found is not None, f"no {name} ({hint})")
    assert found is not None
    return Path(found)


def require_file(path: Path, hint: str) -> Path:
    """The file ``path``, as :func:`require` treats a missing one; ``hint`` says what installs it."""
    require(path.is_file(), f"no {path} ({hint})")
    return path
