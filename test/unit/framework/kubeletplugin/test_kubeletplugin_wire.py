"""Our .proto files describe exactly the wire the kubelet speaks.

The kubelet's own definitions are read from the Go module cache, at the k8s.io/kubelet version the
committed tool module pins (the kubelet this project is tested with), compiled with the same
protoc, and compared with ours descriptor by descriptor: package, services, methods, streaming,
messages, fields (name, number, type, label, explicit presence), map entries and enums. Comments
and Go options may differ; nothing that reaches the wire may.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[4]
OURS = ROOT / "pkg" / "framework" / "kubeletplugin" / "wire"
KUBERNETES_TOOL = ROOT / "hack" / "tools" / "kubernetes"
PAIRS = {
    "dra_v1.proto": "pkg/apis/dra/v1/api.proto",
    "dra_v1beta1.proto": "pkg/apis/dra/v1beta1/api.proto",
    "dra_health_v1alpha1.proto": "pkg/apis/dra-health/v1alpha1/api.proto",
    "dra_health_v1.proto": "pkg/apis/dra-health/v1/api.proto",
    "pluginregistration_v1.proto": "pkg/apis/pluginregistration/v1/api.proto",
}


def _upstream_kubelet_module() -> Path:
    """k8s.io/kubelet's folder in the module cache, at the version hack/tools/kubernetes pins."""
    result = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubelet"],
        cwd=KUBERNETES_TOOL,
        env={**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    directory = Path(result.stdout.strip())
    hint = f"k8s.io/kubelet is not in the Go module cache ({result.stderr.strip()}): run `make tools`"
    assert result.returncode == 0, hint
    assert directory.is_dir(), hint
    return directory


def _compile(include: Path, relative: str) -> descriptor_pb2.FileDescriptorProto:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        code = protoc.main(["protoc", f"-I{include}", f"--descriptor_set_out={out}", relative])
        assert code == 0, f"protoc could not compile {include / relative}"
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return files.file[0]


def _wire_view(file: descriptor_pb2.FileDescriptorProto) -> dict[str, object]:
    """Everything in a file descriptor that reaches the wire, in a comparable form."""

    def message(m: descriptor_pb2.DescriptorProto) -> dict[str, object]:
        return {
            "fields": sorted(
                (f.name, f.number, f.type, f.type_name, f.label, f.proto3_optional) for f in m.field
            ),
            "nested": {n.name: message(n) for n in m.nested_type},
            "map_entry": m.options.map_entry,
            "enums": {e.name: sorted((v.name, v.number) for v in e.value) for e in m.enum_type},
        }

    return {
        "package": file.package,
        "syntax": file.syntax,
        "services": {
            s.name: sorted(
                (m.name, m.input_type, m.output_type, m.client_streaming, m.server_streaming)
                for m in s.method
            )
            for s in file.service
        },
        "messages": {m.name: message(m) for m in file.message_type},
        "enums": {e.name: sorted((v.name, v.number) for v in e.value) for e in file.enum_type},
    }


@pytest.fixture(scope="module")
def upstream() -> Path:
    return _upstream_kubelet_module()


@pytest.mark.parametrize(("ours", "theirs"), sorted(PAIRS.items()))
def test_our_definition_matches_the_kubelets(upstream: Path, ours: str, theirs: str) -> None:
    mine = _wire_view(_compile(ROOT, str((OURS / ours).relative_to(ROOT))))
    kubelet = _wire_view(_compile(upstream, theirs))

    assert mine == kubelet


def test_the_comparison_sees_a_changed_field_number(upstream: Path) -> None:
    """The check is not vacuous: renumbering one field of ours makes the views differ."""
    with tempfile.TemporaryDirectory() as tmp:
        changed = Path(tmp) / "changed.proto"
        changed.write_text(
            (OURS / "dra_v1.proto").read_text().replace("string device_name = 3;", "string device_name = 6;")
        )
        mine = _wire_view(_compile(Path(tmp), "changed.proto"))
    kubelet = _wire_view(_compile(upstream, PAIRS["dra_v1.proto"]))

    assert mine != kubelet
