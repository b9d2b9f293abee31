"""A driver root rebuilt from a recorded listing of a real node: same folders, names and links.

``test/fixtures/facts/driver-root-h200-graphics.txt`` holds what ``find`` printed for a real
driver folder (type, size, link target per entry), every ICD/vendor/layer file's content and the
``ld.so.conf`` files. Rebuilt here under a scratch folder standing for the host's ``/``: folders
and links as listed; every ``<name>.so.<version>`` file a real shared object whose soname is the
listed link that points at it (``libcuda.so.1`` → ``libcuda.so.580.159.04``), or its own name
where no such link exists, as the driver's files are; the other files small stand-ins, the
configuration files with their recorded content.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from pkg.devcluster.driverroot import build_library

FACTS: Final = Path(__file__).resolve().parents[3] / "fixtures" / "facts"
H200_LISTING: Final = FACTS / "driver-root-h200-graphics.txt"
H200_NVIDIA_CTK_SPEC: Final = FACTS / "nvidia-ctk-cdi-h200.yaml"
_ENTRY: Final = re.compile(r"^(?P<kind>[dfl]) \d+ (?P<path>/\S+) -> ?(?P<target>\S*)$")
_FILE_SECTIONS: Final = ("## ICD / vendor / layer JSON files", "## /etc/ld.so.conf.d")


def build_recorded_root(host: Path, listing: Path = H200_LISTING) -> Path:
    """Builds the recorded host under ``host`` (the folder standing for its ``/``); returns it."""
    text = listing.read_text()
    entries = [m.groupdict() for line in text.splitlines() if (m := _ENTRY.match(line))]
    links = {e["path"]: e["target"] for e in entries if e["kind"] == "l"}
    for entry in sorted(entries, key=lambda e: e["kind"] != "d"):  # folders first
        path = host / entry["path"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if entry["kind"] == "d":
            path.mkdir(exist_ok=True)
        elif entry["kind"] == "l":
            path.symlink_to(entry["target"])
        elif ".so." in path.name:
            build_library(path, soname=_soname(entry["path"], links))
        else:
            path.write_bytes(b"stand-in for a file of the recorded driver\n")
    for recorded, content in _recorded_files(text).items():
        path = host / recorded.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return host


def _soname(path: str, links: dict[str, str]) -> str:
    """The link in the same folder that points at ``path`` and is not the unversioned name."""
    folder, _, name = path.rpartition("/")
    unversioned = name.partition(".so.")[0] + ".so"
    for link, target in links.items():
        link_folder, _, link_name = link.rpartition("/")
        if link_folder == folder and target == name and link_name != unversioned:
            return link_name
    return name


def _recorded_files(text: str) -> dict[str, str]:
    """``### <path>`` sections (and their content) of the listing's file sections."""
    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_section = False
    for line in text.splitlines():
        if line.startswith("## "):
            in_section = line.startswith(_FILE_SECTIONS)
            current = None
        elif in_section and line.startswith("### /"):
            current = files.setdefault(line.removeprefix("### "), [])
        elif current is not None:
            current.append(line)
    return {path: "\n".join(lines).strip() + "\n" for path, lines in files.items()}
