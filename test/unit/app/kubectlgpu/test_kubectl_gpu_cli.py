"""The plugin's conventions without a cluster: kubectl's kubeconfig rules, global flags on either
side of the subcommand, output forms, and refusals turned into sentences with their exit codes."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from pkg.app.kubectlgpu import access
from pkg.app.kubectlgpu.access import EXIT_FORBIDDEN, EXIT_NOT_FOUND, ForbiddenError, ObjectNotFoundError
from pkg.app.kubectlgpu.cli import parser, run
from pkg.app.kubectlgpu.table import Column, Row, age_text, bytes_text, write
from pkg.framework.client import ApiError, NotFoundError
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.framework.client.config import kubectl_api_client


def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    cluster = {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "first", "context": {"cluster": "c", "user": "u", "namespace": "ml"}},
                    {"name": "second", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "first",
            }
        )
    )
    return path


def test_namespace_comes_from_the_chosen_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = kubeconfig(tmp_path)
    assert kubectl_api_client(str(path))[1] == "ml"
    assert kubectl_api_client(str(path), context="second")[1] == "default"
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{path}")  # a list, as kubectl reads it
    assert kubectl_api_client(None)[1] == "ml"


def test_without_any_kubeconfig_it_says_where_one_is_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    err = io.StringIO()
    assert run(["top"], err=err) == 1
    assert err.getvalue() == (
        "error: cannot load the kubeconfig: no kubeconfig: pass --kubeconfig, set KUBECONFIG or create "
        "~/.kube/config\n"
    )


def test_global_flags_go_before_or_after_the_subcommand() -> None:
    before = parser().parse_args(["-n", "ml", "--context", "x", "top", "--sort-by", "sm"])
    after = parser().parse_args(["top", "-n", "ml", "--context", "x"])
    assert (before.namespace, before.context, before.sort_by) == ("ml", "x", "sm")
    assert (after.namespace, after.context, after.sort_by) == ("ml", "x", "memory")


def test_bad_usage_exits_2_and_unreachable_cluster_exits_1(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as usage:
        parser().parse_args(["top", "-o", "table"])
    assert usage.value.code == 2
    err = io.StringIO()
    code = run(["who", "--kubeconfig", str(kubeconfig(tmp_path)), "--request-timeout", "2"], err=err)
    assert code == 1
    assert err.getvalue().startswith("error: cannot reach the API server")
    assert "Traceback" not in err.getvalue()


@pytest.mark.parametrize(
    ("raised", "expected", "code"),
    [
        (
            ApiError(status=403, reason="Forbidden", message="no"),
            "forbidden: you cannot list resourceslices.resource.k8s.io at the cluster scope",
            EXIT_FORBIDDEN,
        ),
        (NotFoundError(status=404, reason="NotFound", message="gone"), "ResourceSlice", EXIT_NOT_FOUND),
    ],
)
def test_api_errors_become_sentences_with_their_exit_codes(
    raised: ApiError, expected: str, code: int
) -> None:
    with (
        pytest.raises((ForbiddenError, ObjectNotFoundError)) as caught,
        access._translated("list", RESOURCE_SLICE, None, name="x"),
    ):
        raise raised
    assert str(caught.value).startswith(expected)
    assert caught.value.exit_code == code


def test_forbidden_in_a_namespace_names_it() -> None:
    with pytest.raises(ForbiddenError) as caught, access._translated("get", RESOURCE_CLAIM, "ml"):
        raise ApiError(status=403, reason="Forbidden", message="no")
    assert str(caught.value) == 'forbidden: you cannot get resourceclaims.resource.k8s.io in namespace "ml"'


def test_table_json_and_yaml() -> None:
    columns = (Column("NAME"), Column("MEMORY"), Column("UUID", wide=True))
    rows = [Row({"NAME": "a", "MEMORY": "1Gi", "UUID": "GPU-1"}, {"name": "a", "memoryBytes": 1024**3})]
    table, wide, as_json = io.StringIO(), io.StringIO(), io.StringIO()
    write(table, kind="L", columns=columns, rows=rows, output=None)
    write(wide, kind="L", columns=columns, rows=rows, output="wide")
    write(as_json, kind="L", columns=columns, rows=rows, output="json")
    assert table.getvalue() == "NAME   MEMORY\na      1Gi\n"
    assert wide.getvalue() == "NAME   MEMORY   UUID\na      1Gi      GPU-1\n"
    assert json.loads(as_json.getvalue())["items"] == [{"name": "a", "memoryBytes": 1024**3}]


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (1023, "1023"), (1536, "1.5Ki"), (80 * 1024**3, "80Gi"), (3 * 1024**5, "3Pi")],
)
def test_bytes_text(value: int, text: str) -> None:
    assert bytes_text(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-5, "0s"), (45, "45s"), (200, "3m20s"), (1000, "16m"), (4 * 3600, "4h"), (3 * 86400, "3d")],
)
def test_age_text(seconds: int, text: str) -> None:
    assert age_text(timedelta(seconds=seconds)) == text
