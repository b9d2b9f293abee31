"""Names for PCI IDs from a ``pci.ids`` database (``pciInfo.*.name``).

The spec fills ``pciInfo.class.name``, ``vendor.name`` and ``device.name`` from ``pci.ids`` and
leaves a name out when the database has none. Names are a convenience, never a reason to fail: a
missing or unreadable file gives an empty database, one warning, and objects without names.

The format (https://pci-ids.ucw.cz) is line based, indented with tabs::

    10de  NVIDIA Corporation                 vendor
    <TAB>20b7  GA100GL [A30 PCIe]            device of the vendor above
    <TAB><TAB>10de 1532  GA100GL [A30 PCIe]  subsystem (subvendor subdevice) of that device (not kept)
    C 03  Display controller                 class; from here on, tabs mean subclasses
    <TAB>02  3D controller                   subclass 0302
    <TAB><TAB>00  ...                        programming interface (not kept)

Parsing the whole ~1.4 MB file is one pass over its lines into dictionaries; it takes a few tens of
milliseconds, far below the node agent's start-up budget, so nothing is parsed lazily.

Because names are never a reason to fail, the parser never raises: a line that fits no rule (a
lone tab, a key without a name, binary junk) is skipped, as lspci skips it, and a file that is not
a regular file or is larger than :data:`MAX_FILE_BYTES` is read as no file at all.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pkg.hardware.files import read_bytes

logger = logging.getLogger(__name__)

DEFAULT_PATHS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids")
MAX_FILE_BYTES = 64 * 1024 * 1024  # the real file is ~1.4 MB


def find_default() -> Path | None:
    """The first of :data:`DEFAULT_PATHS` that is a file, or ``None``."""
    for candidate in DEFAULT_PATHS:
        path = Path(candidate)
        if path.is_file():
            return path
    return None


def _norm(hex_id: str) -> str:
    """``"0x10DE"`` → ``"10de"``: IDs reach us from sysfs, NVML and people, spelled differently."""
    text = hex_id.strip().lower()
    return text[2:] if text.startswith("0x") else text


def _entry(text: str) -> tuple[str, str]:
    """``"10de  NVIDIA Corporation"`` -> ``("10de", "NVIDIA Corporation")``; ``("", "")`` for junk."""
    key, sep, name = text.partition("  ")
    key = key.strip().lower()
    if not sep or not key or not name.strip():
        return "", ""
    return key, name.strip()


class PciIds:
    """An immutable pci.ids database; every lookup returns ``None`` when the name is unknown."""

    def __init__(self) -> None:
        self._vendors: dict[str, str] = {}
        self._devices: dict[str, str] = {}  # "vvvv:dddd"
        self._classes: dict[str, str] = {}  # "03" and "0302"

    @classmethod
    def load(cls, path: Path | None) -> PciIds:
        """Parse ``path`` (default: :func:`find_default`); empty, with one warning, if unreadable."""
        path = path if path is not None else find_default()
        if path is None:
            logger.warning(
                "no pci.ids in %s; PCI names stay empty",
                ", ".join(DEFAULT_PATHS),
                extra={"searched": DEFAULT_PATHS},
            )
            return cls()
        try:
            text = read_bytes(path, limit=MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError as err:
            logger.warning(
                "cannot read %s; PCI names stay empty: %s",
                path,
                err,
                extra={"path": str(path), "error": str(err)},
            )
            return cls()
        return cls.parse(text)

    @classmethod
    def parse(cls, text: str) -> PciIds:
        """Parse the text of a pci.ids file. Lines that fit no rule are ignored, as lspci does."""
        db = cls()
        vendor = klass = ""
        in_classes = False
        for line in text.splitlines():
            if not line.strip() or line[0] == "#":
                continue
            if line[0] != "\t":
                in_classes = line.startswith("C ")
                if in_classes:
                    klass, name = _entry(line[2:])
                    if klass:
                        db._classes[klass] = name
                else:
                    vendor, name = _entry(line)
                    if vendor:
                        db._vendors[vendor] = name
            elif not line.startswith("\t\t"):
                key, name = _entry(line[1:])
                if not key:
                    continue
                if in_classes:
                    if klass:
                        db._classes[klass + key] = name
                elif vendor:
                    db._devices[f"{vendor}:{key}"] = name
        return db

    @property
    def is_empty(self) -> bool:
        """True for the database of a missing file: every lookup answers ``None``."""
        return not (self._vendors or self._classes)

    def vendor_name(self, vendor_id: str) -> str | None:
        return self._vendors.get(_norm(vendor_id))

    def device_name(self, vendor_id: str, device_id: str) -> str | None:
        return self._devices.get(f"{_norm(vendor_id)}:{_norm(device_id)}")

    def class_name(self, class_code: str) -> str | None:
        """``"0302"`` → ``"3D controller"``; an unknown subclass falls back to its base class name.

        Accepts a 6-digit code with the programming interface too (``"030200"``); it is ignored.
        """
        code = _norm(class_code)[:4]
        return self._classes.get(code) or self._classes.get(code[:2])
