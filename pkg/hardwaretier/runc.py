"""Running a bundle with runc, in a state folder of the tier's own.

``runc --root <state>`` keeps the tier's containers out of the host's ``/run/runc``, so a run that
died leaves nothing another runc user would trip over, and :func:`run_container` always deletes
its container (``runc delete --force``) whether the program succeeded, failed or timed out. runc
comes from ``$GPU_CP_RUNC`` or ``PATH`` (Debian's ``runc`` package).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

RUNC_ENV: Final = "GPU_CP_RUNC"


@dataclass(frozen=True)
class ContainerRun:
    """What one container did: its ID, exit code and output."""

    container_id: str
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        """The run in a few lines, for an assertion message."""
        return (
            f"container {self.container_id} exited {self.returncode}\n"
            f"stdout:\n{self.stdout.rstrip()}\nstderr:\n{self.stderr.rstrip()}"
        )


def find_runc(env: Mapping[str, str] = os.environ) -> Path:
    """runc from ``$GPU_CP_RUNC`` or ``PATH``; a clear error otherwise."""
    named = env.get(RUNC_ENV)
    if named:
        if not (Path(named).is_file() and os.access(named, os.X_OK)):
            raise FileNotFoundError(f"${RUNC_ENV}={named} is not an executable file")
        return Path(named)
    on_path = shutil.which("runc", path=env.get("PATH", os.defpath))
    if not on_path:
        raise FileNotFoundError(f"runc is not on PATH: install Debian's runc package or set ${RUNC_ENV}")
    return Path(on_path)


def run_container(
    runc: Path, *, bundle: Path, container_id: str, state_root: Path, timeout: float = 120.0
) -> ContainerRun:
    """``runc run`` of ``bundle`` in the foreground; the container is deleted afterwards."""
    state_root.mkdir(parents=True, exist_ok=True)
    base = [str(runc), "--root", str(state_root)]
    try:
        result = subprocess.run(
            [*base, "run", "--bundle", str(bundle), container_id],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        return ContainerRun(
            container_id=container_id,
            returncode=-1,
            stdout=_text(exc.stdout),
            stderr=_text(exc.stderr) + f"\n(timed out after {timeout:g}s)",
        )
    finally:
        subprocess.run(
            [*base, "delete", "--force", container_id], capture_output=True, check=False, timeout=60
        )
    return ContainerRun(
        container_id=container_id, returncode=result.returncode, stdout=result.stdout, stderr=result.stderr
    )


class RunningContainer:
    """A container started by :func:`start_container`, running while the caller looks at it from
    outside (its processes as NVML lists them); :meth:`wait` ends it and deletes it."""

    def __init__(self, runc: Path, *, bundle: Path, container_id: str, state_root: Path) -> None:
        state_root.mkdir(parents=True, exist_ok=True)
        self.container_id = container_id
        self._base = [str(runc), "--root", str(state_root)]
        self._process = subprocess.Popen(
            [*self._base, "run", "--bundle", str(bundle), container_id],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def running(self) -> bool:
        return self._process.poll() is None

    def wait(self, timeout: float = 120.0) -> ContainerRun:
        try:
            stdout, stderr = self._process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            stdout, stderr = self._process.communicate()
            stderr += f"\n(timed out after {timeout:g}s)"
        finally:
            subprocess.run(
                [*self._base, "delete", "--force", self.container_id],
                capture_output=True,
                check=False,
                timeout=60,
            )
        return ContainerRun(
            container_id=self.container_id, returncode=self._process.returncode, stdout=stdout, stderr=stderr
        )


def start_container(runc: Path, *, bundle: Path, container_id: str, state_root: Path) -> RunningContainer:
    """``runc run`` of ``bundle`` in the background; :meth:`RunningContainer.wait` collects it."""
    return RunningContainer(runc, bundle=bundle, container_id=container_id, state_root=state_root)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value
