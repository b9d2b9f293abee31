"""The files an IMEX daemon of one ensemble reads: rendered by gpu-controller, parsed by the stand-in.

gpu-controller keeps one ConfigMap per NVLink clique in use (the clique's IMEX ensemble, shared by
the compute domains pinned to it), mounted at ``/etc/nvidia-imex`` in every daemon Pod of the
ensemble; its data is what :func:`render_imex_files` returns (plus the ensemble's own
``members.json``):

* ``config.cfg`` — NVIDIA's ``key=value`` configuration of ``nvidia-imex`` (the keys and defaults
  NVIDIA documents: ``SERVER_PORT``, ``IMEX_NODE_CONFIG_FILE``, ``IMEX_CMD_*``, ...);
* ``nodes_config.cfg`` — one peer per line, as NVIDIA's daemon reads it; we list the members'
  stable names ``imex-<index>``, never their addresses;
* ``hosts`` — ``ADDRESS NAME`` lines, the current daemon Pod IP of every stable name that has
  one: what the daemon's wrapper adds to its ``/etc/hosts`` (a member whose Pod has no IP yet is
  left out, so its name does not resolve and the peers keep retrying it).

Why names and a hosts file rather than addresses in ``nodes_config.cfg``: a daemon Pod gets a new
IP whenever it is recreated, and NVIDIA's daemon reads its nodes file only at start-up. With
stable names the nodes file changes only when the membership does, so a Pod that moves restarts
no one else; its peers re-resolve the name (the real daemon on SIGUSR1, the stand-in on every
attempt). :func:`nodes_hash` is therefore computed from ``config.cfg`` and ``nodes_config.cfg``
alone: the Pods carry it, and a change of it (membership, port) is what recreates them.

The parsers refuse what they do not understand with an :class:`ImexConfigError` naming the file
and the line, and refuse a file over :data:`MAX_FILE_BYTES` before reading it: the stand-in trusts
nothing it reads from a mount.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

CONFIG_DIR: Final = "/etc/nvidia-imex"
CONFIG_FILE: Final = "config.cfg"
NODES_FILE: Final = "nodes_config.cfg"
HOSTS_FILE: Final = "hosts"
DEFAULT_SERVER_PORT: Final = 50000  # NVIDIA's default SERVER_PORT
DEFAULT_CMD_PORT: Final = 50005  # the command service port of NVIDIA's shipped config.cfg
MAX_FILE_BYTES: Final = 1024 * 1024
MEMBER_PREFIX: Final = "imex-"
HASH_LENGTH: Final = 16

_MEMBER_NAME = re.compile(r"imex-(0|[1-9][0-9]{0,5})")
_KEY = re.compile(r"[A-Z][A-Z0-9_]*")
_HOST_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


class ImexConfigError(ValueError):
    """A file of an IMEX daemon's configuration that cannot be used; the message names it."""


@dataclass(frozen=True)
class ImexMember:
    """A member node as its peers know it: the stable name, and the address once its daemon has one."""

    name: str
    address: str | None

    @property
    def index(self) -> int:
        return int(self.name.removeprefix(MEMBER_PREFIX))


@dataclass(frozen=True)
class ImexDaemonConfig:
    """What an IMEX daemon reads from ``config.cfg``; every key we do not model stays in ``values``."""

    server_port: int = DEFAULT_SERVER_PORT
    node_config_file: str = f"{CONFIG_DIR}/{NODES_FILE}"
    bind_interface_ip: str = ""
    cmd_enabled: bool = True
    cmd_port: int = DEFAULT_CMD_PORT
    values: Mapping[str, str] = field(default_factory=dict)


def member_name(index: int) -> str:
    """The stable name of the member with this index (``imex-0``, ``imex-1``, ...)."""
    if index < 0:
        raise ValueError(f"an IMEX member index is not negative: {index}")
    return f"{MEMBER_PREFIX}{index}"


def render_imex_files(
    members: Sequence[tuple[str, str | None]],
    *,
    port: int,
    cmd_port: int = DEFAULT_CMD_PORT,
    config_dir: str = CONFIG_DIR,
) -> dict[str, str]:
    """The ConfigMap data of an ensemble: ``config.cfg``, ``nodes_config.cfg`` and ``hosts``.

    ``members`` are (stable name, current address or None); they are written in index order,
    whatever order they come in, so the same membership always renders the same files.
    """
    checked = _members(members)
    return {
        CONFIG_FILE: _render_config(port=port, cmd_port=cmd_port, config_dir=config_dir),
        NODES_FILE: _render_nodes(checked),
        HOSTS_FILE: _render_hosts(checked),
    }


def nodes_hash(
    members: Sequence[tuple[str, str | None]],
    *,
    port: int = DEFAULT_SERVER_PORT,
    cmd_port: int = DEFAULT_CMD_PORT,
    config_dir: str = CONFIG_DIR,
) -> str:
    """A short hash of what a running daemon cannot take without a restart: its config and its peers' names.

    Addresses are not in it: they reach a running daemon through the hosts file.
    """
    files = render_imex_files(members, port=port, cmd_port=cmd_port, config_dir=config_dir)
    digest = hashlib.sha256()
    for name in (CONFIG_FILE, NODES_FILE):
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(files[name].encode())
        digest.update(b"\0")
    return digest.hexdigest()[:HASH_LENGTH]


def parse_config(text: str, *, source: str = CONFIG_FILE) -> ImexDaemonConfig:
    """``config.cfg``: ``KEY=VALUE`` lines, ``#`` comments and blank lines; a key given twice is refused."""
    entries: dict[str, tuple[str, int]] = {}
    for number, line in _lines(text, source):
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _KEY.fullmatch(key):
            raise ImexConfigError(f"{source}:{number}: expected KEY=VALUE, got {line!r}")
        if key in entries:
            raise ImexConfigError(f"{source}:{number}: {key} is set twice (first on line {entries[key][1]})")
        entries[key] = (value.strip(), number)
    keys = _Keys(entries, source)
    return ImexDaemonConfig(
        server_port=keys.port("SERVER_PORT", DEFAULT_SERVER_PORT),
        node_config_file=keys.text("IMEX_NODE_CONFIG_FILE") or f"{CONFIG_DIR}/{NODES_FILE}",
        bind_interface_ip=keys.address("BIND_INTERFACE_IP"),
        cmd_enabled=keys.flag("IMEX_CMD_ENABLED"),
        cmd_port=keys.port("IMEX_CMD_PORT", DEFAULT_CMD_PORT),
        values={key: value for key, (value, _) in entries.items()},
    )


def parse_nodes_config(text: str, *, source: str = NODES_FILE) -> tuple[str, ...]:
    """``nodes_config.cfg``: one peer (an IP address or a host name) per line, each once, in file order."""
    nodes: list[str] = []
    for number, line in _lines(text, source):
        if not (_is_address(line) or _is_host_name(line)):
            raise ImexConfigError(f"{source}:{number}: {line!r} is neither an IP address nor a host name")
        if line in nodes:
            raise ImexConfigError(f"{source}:{number}: {line} is listed twice")
        nodes.append(line)
    return tuple(nodes)


def parse_hosts(text: str, *, source: str = HOSTS_FILE) -> dict[str, str]:
    """A hosts file (``ADDRESS NAME [ALIAS ...]`` lines) as name -> address; one name, one address."""
    addresses: dict[str, str] = {}
    for number, line in _lines(text, source):
        fields = line.split("#", 1)[0].split()  # as hosts(5): a comment may end a line
        if len(fields) < 2:
            raise ImexConfigError(f"{source}:{number}: expected ADDRESS NAME, got {line!r}")
        address, names = fields[0], fields[1:]
        if not _is_address(address):
            raise ImexConfigError(f"{source}:{number}: {address!r} is not an IP address")
        for name in names:
            if not _is_host_name(name):
                raise ImexConfigError(f"{source}:{number}: {name!r} is not a host name")
            if addresses.get(name, address) != address:
                raise ImexConfigError(
                    f"{source}:{number}: {name} has two addresses, {addresses[name]} and {address}"
                )
            addresses[name] = address
    return addresses


def read_bounded(path: Path) -> str:
    """A configuration file's text, refused when it is over :data:`MAX_FILE_BYTES` or not UTF-8."""
    with path.open("rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ImexConfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes, refused")
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise ImexConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _members(members: Iterable[tuple[str, str | None]]) -> list[ImexMember]:
    checked: dict[str, ImexMember] = {}
    for name, address in members:
        if not _MEMBER_NAME.fullmatch(name):
            raise ValueError(f"IMEX member {name!r}: the name must be {MEMBER_PREFIX}<index>")
        if name in checked:
            raise ValueError(f"IMEX member {name} is given twice")
        if address is not None and not _is_address(address):
            raise ValueError(f"IMEX member {name}: {address!r} is not an IP address")
        checked[name] = ImexMember(name=name, address=address)
    return sorted(checked.values(), key=lambda member: member.index)


def _render_config(*, port: int, cmd_port: int, config_dir: str) -> str:
    for key, value in (("SERVER_PORT", port), ("IMEX_CMD_PORT", cmd_port)):
        if not 1 <= value <= 65535:
            raise ValueError(f"IMEX {key} must be within 1..65535, got {value}")
    if port == cmd_port:
        raise ValueError(f"IMEX SERVER_PORT and IMEX_CMD_PORT must differ, both are {port}")
    lines = [
        "# nvidia-imex configuration of one ComputeDomain, rendered by gpu-controller.",
        "# Peers are the stable names of nodes_config.cfg; their addresses come from the hosts file.",
        "DAEMONIZE=0",  # the container's main process: it must stay in the foreground
        "LOG_LEVEL=4",
        "LOG_FILE_NAME=",  # empty: logs go to stderr, hence to the Pod's log
        "BIND_INTERFACE_IP=",  # empty: the daemon finds its own address among its peers'
        f"SERVER_PORT={port}",
        f"IMEX_NODE_CONFIG_FILE={config_dir}/{NODES_FILE}",
        # NVIDIA's default: a fresh daemon starts at once; one that ended uncleanly first waits
        # for the nodes that imported from it, so their stale references get cleaned up.
        "IMEX_WAIT_FOR_QUORUM=RECOVERY",
        "IMEX_CMD_ENABLED=1",  # nvidia-imex-ctl -q, the readiness probe, asks the command service
        "IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1",
        f"IMEX_CMD_PORT={cmd_port}",
        "IMEX_NODE_DISCONNECTED_GRACE_TIME=-1",
    ]
    return "\n".join(lines) + "\n"


def _render_nodes(members: Sequence[ImexMember]) -> str:
    return "".join(f"{member.name}\n" for member in members)


def _render_hosts(members: Sequence[ImexMember]) -> str:
    return "".join(f"{member.address} {member.name}\n" for member in members if member.address is not None)


def _lines(text: str, source: str) -> Iterable[tuple[int, str]]:
    if len(text.encode()) > MAX_FILE_BYTES:
        raise ImexConfigError(f"{source}: larger than {MAX_FILE_BYTES} bytes, refused")
    for number, raw in enumerate(text.splitlines(), start=1):
        if "\0" in raw:
            raise ImexConfigError(f"{source}:{number}: a NUL byte in the line")
        line = raw.strip()
        if line and not line.startswith("#"):
            yield number, line


@dataclass(frozen=True)
class _Keys:
    """The typed reading of config.cfg's values, each error naming the line the key is on."""

    entries: Mapping[str, tuple[str, int]]
    source: str

    def text(self, key: str) -> str:
        return self.entries.get(key, ("", 0))[0]

    def port(self, key: str, default: int) -> int:
        raw = self.text(key)
        if not raw:
            return default
        if not raw.isdigit() or int(raw) > 65535:
            raise self._error(key, f"must be a port 0..65535, got {raw!r}")
        return int(raw)

    def flag(self, key: str) -> bool:
        raw = self.text(key) or "0"
        if raw not in ("0", "1"):
            raise self._error(key, f"must be 0 or 1, got {raw!r}")
        return raw == "1"

    def address(self, key: str) -> str:
        raw = self.text(key)
        if raw and not _is_address(raw):
            raise self._error(key, f"must be an IP address, got {raw!r}")
        return raw

    def _error(self, key: str, problem: str) -> ImexConfigError:
        return ImexConfigError(f"{self.source}:{self.entries[key][1]}: {key} {problem}")


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _host_name_shaped(text: str) -> bool:
    return len(text) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in text.split("."))


def _is_host_name(text: str) -> bool:
    return _host_name_shaped(text) and not text.replace(".", "").isdigit()
