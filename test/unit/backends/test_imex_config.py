"""The IMEX daemon's files: what gpu-controller renders, the daemon parses back; bad files are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkg.backends.nvidia.imex_config import (
    CONFIG_FILE,
    DEFAULT_CMD_PORT,
    HOSTS_FILE,
    MAX_FILE_BYTES,
    NODES_FILE,
    ImexConfigError,
    member_name,
    nodes_hash,
    parse_config,
    parse_hosts,
    parse_nodes_config,
    read_bounded,
    render_imex_files,
)

MEMBERS = [("imex-2", "10.0.0.12"), ("imex-0", "10.0.0.10"), ("imex-1", None)]


def test_render_writes_the_three_files_in_index_order_and_leaves_addressless_names_out_of_hosts() -> None:
    files = render_imex_files(MEMBERS, port=50100)

    assert set(files) == {CONFIG_FILE, NODES_FILE, HOSTS_FILE}
    assert files[NODES_FILE] == "imex-0\nimex-1\nimex-2\n"
    assert files[HOSTS_FILE] == "10.0.0.10 imex-0\n10.0.0.12 imex-2\n"


def test_render_then_parse_gives_back_the_port_the_nodes_and_the_addresses() -> None:
    files = render_imex_files(MEMBERS, port=50100, cmd_port=50200, config_dir="/cfg")

    config = parse_config(files[CONFIG_FILE])
    assert config.server_port == 50100
    assert config.cmd_port == 50200
    assert config.cmd_enabled is True
    assert config.node_config_file == "/cfg/nodes_config.cfg"
    assert config.values["DAEMONIZE"] == "0"  # the container's main process stays in the foreground
    assert parse_nodes_config(files[NODES_FILE]) == ("imex-0", "imex-1", "imex-2")
    assert parse_hosts(files[HOSTS_FILE]) == {"imex-0": "10.0.0.10", "imex-2": "10.0.0.12"}


def test_the_default_command_port_is_nvidias() -> None:
    assert parse_config(render_imex_files([], port=50000)[CONFIG_FILE]).cmd_port == DEFAULT_CMD_PORT == 50005


@pytest.mark.parametrize(
    ("members", "port", "message"),
    [
        ([("node-a", None)], 50000, "'node-a': the name must be imex-<index>"),
        ([("imex-0", None), ("imex-0", "10.0.0.1")], 50000, "imex-0 is given twice"),
        ([("imex-0", "not-an-ip")], 50000, "imex-0: 'not-an-ip' is not an IP address"),
        ([], 0, "SERVER_PORT must be within 1..65535"),
        ([], DEFAULT_CMD_PORT, "must differ"),
    ],
)
def test_render_refuses_bad_members_and_ports_naming_them(
    members: list[tuple[str, str | None]], port: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        render_imex_files(members, port=port)


def test_member_names_are_stable_per_index() -> None:
    assert [member_name(index) for index in (0, 1, 17)] == ["imex-0", "imex-1", "imex-17"]
    with pytest.raises(ValueError, match="-1"):
        member_name(-1)


def test_nodes_hash_ignores_addresses_and_order() -> None:
    moved = [("imex-0", "10.9.9.9"), ("imex-1", "10.0.0.11"), ("imex-2", None)]

    assert nodes_hash(MEMBERS) == nodes_hash(list(reversed(moved)))
    assert len(nodes_hash(MEMBERS)) == 16


def test_nodes_hash_changes_with_membership_and_port() -> None:
    base = nodes_hash(MEMBERS)

    assert nodes_hash([*MEMBERS, ("imex-3", None)]) != base
    assert nodes_hash(MEMBERS[:2]) != base
    assert nodes_hash([("imex-5", m[1]) if m[0] == "imex-1" else m for m in MEMBERS]) != base
    assert nodes_hash(MEMBERS, port=50001) != base


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SERVER_PORT=50000\nnot a setting\n", r"config.cfg:2: expected KEY=VALUE, got 'not a setting'"),
        (
            "SERVER_PORT=1\n# c\nSERVER_PORT=2\n",
            r"config.cfg:3: SERVER_PORT is set twice \(first on line 1\)",
        ),
        ("\nSERVER_PORT=http\n", r"config.cfg:2: SERVER_PORT must be a port 0..65535, got 'http'"),
        ("SERVER_PORT=70000\n", r"config.cfg:1: SERVER_PORT must be a port"),
        ("IMEX_CMD_ENABLED=yes\n", r"config.cfg:1: IMEX_CMD_ENABLED must be 0 or 1"),
        ("BIND_INTERFACE_IP=eth0\n", r"config.cfg:1: BIND_INTERFACE_IP must be an IP address"),
        ("lower_case=1\n", r"config.cfg:1: expected KEY=VALUE"),
    ],
)
def test_parse_config_refuses_malformed_lines_naming_file_and_line(text: str, message: str) -> None:
    with pytest.raises(ImexConfigError, match=message):
        parse_config(text)


def test_parse_config_takes_nvidias_defaults_for_what_is_not_set() -> None:
    config = parse_config("# only a comment\n\nLOG_LEVEL=4\n")

    assert (config.server_port, config.node_config_file) == (50000, "/etc/nvidia-imex/nodes_config.cfg")
    assert config.values == {"LOG_LEVEL": "4"}


def test_parse_nodes_config_takes_addresses_and_names_and_refuses_the_rest() -> None:
    assert parse_nodes_config("# peers\n10.0.0.1\n\nimex-1\nfd00::2\n") == ("10.0.0.1", "imex-1", "fd00::2")
    with pytest.raises(ImexConfigError, match=r"nodes_config.cfg:2: 'imex 1' is neither"):
        parse_nodes_config("imex-0\nimex 1\n")
    with pytest.raises(ImexConfigError, match=r"nodes_config.cfg:3: imex-0 is listed twice"):
        parse_nodes_config("imex-0\nimex-1\nimex-0\n")
    with pytest.raises(ImexConfigError, match="neither"):
        parse_nodes_config("10.0.0.300\n")  # digits only: a broken address, not a host name


def test_parse_hosts_maps_names_and_aliases_and_refuses_malformed_lines() -> None:
    assert parse_hosts("127.0.0.1 localhost\n10.0.0.1\timex-0 alias-0 # the first member\n") == {
        "localhost": "127.0.0.1",
        "imex-0": "10.0.0.1",
        "alias-0": "10.0.0.1",
    }
    with pytest.raises(ImexConfigError, match=r"hosts:1: expected ADDRESS NAME"):
        parse_hosts("10.0.0.1\n")
    with pytest.raises(ImexConfigError, match=r"hosts:2: 'imex-0' is not an IP address"):
        parse_hosts("# x\nimex-0 10.0.0.1\n")
    with pytest.raises(ImexConfigError, match=r"hosts:2: imex-0 has two addresses, 10.0.0.1 and 10.0.0.2"):
        parse_hosts("10.0.0.1 imex-0\n10.0.0.2 imex-0\n")
    with pytest.raises(ImexConfigError, match=r"my-hosts:1: 'bad_name' is not a host name"):
        parse_hosts("10.0.0.1 bad_name\n", source="my-hosts")


def test_a_file_over_one_mebibyte_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "nodes_config.cfg"
    big.write_text("imex-0\n" * (MAX_FILE_BYTES // 7 + 1))

    with pytest.raises(ImexConfigError, match=r"nodes_config.cfg: larger than 1048576 bytes"):
        read_bounded(big)
    with pytest.raises(ImexConfigError, match="larger than"):
        parse_nodes_config(big.read_text())


def test_a_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "hosts"
    binary.write_bytes(b"10.0.0.1 imex-0\n\xff\xfe")

    with pytest.raises(ImexConfigError, match=r"hosts: not UTF-8"):
        read_bounded(binary)
    binary.write_text("10.0.0.1 imex-0\n")
    assert read_bounded(binary) == "10.0.0.1 imex-0\n"
