"""Generate the Python modules of the kubelet plugin's gRPC API from its .proto files.

Usage (from the repository root):
    .venv/bin/python hack/generate_protos.py            # write pkg/framework/kubeletplugin/wire/*_pb2.py(i)
    .venv/bin/python hack/generate_protos.py --check    # exit 1 naming the stale files

The .proto files in ``pkg/framework/kubeletplugin/wire/`` are ours, written from the kubelet's published
wire contract; the generated modules are committed so that installing the project needs no
compiler. protoc runs with the repository root as its include path, so the generated modules
import each other as ``pkg.framework.kubeletplugin.wire.<name>_pb2`` and live in a package like any other.
Only messages are generated (with type stubs); the services are served by
:mod:`pkg.framework.kubeletplugin.handlers` from the service descriptors, typed, instead of through
grpc's untyped generated servicer classes.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

REPO_ROOT = Path(__file__).resolve().parents[1]
WIRE = REPO_ROOT / "pkg" / "framework" / "kubeletplugin" / "wire"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi")


def generate(out_root: Path) -> list[Path]:
    """Runs protoc for every .proto file; returns the generated files (under ``out_root``)."""
    protos = sorted(WIRE.glob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto shipped with grpcio-tools
    args = [
        "protoc",
        f"-I{REPO_ROOT}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        *(str(p.relative_to(REPO_ROOT)) for p in protos),
    ]
    if protoc.main(args) != 0:
        raise SystemExit(f"protoc failed for {', '.join(p.name for p in protos)}")
    relative = WIRE.relative_to(REPO_ROOT)
    return sorted(p for p in (out_root / relative).iterdir() if p.name.endswith(GENERATED_SUFFIXES))


def stale_files() -> list[str]:
    """Names of generated files that differ from what protoc writes now (or are missing/extra)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.name: p for p in generate(Path(tmp))}
        committed = {p.name: p for p in WIRE.iterdir() if p.name.endswith(GENERATED_SUFFIXES)}
        names = sorted(fresh.keys() | committed.keys())
        return [
            n
            for n in names
            if n not in fresh or n not in committed or not filecmp.cmp(fresh[n], committed[n], shallow=False)
        ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    if parser.parse_args().check:
        stale = stale_files()
        if stale:
            print(f"stale generated files in {WIRE}: {', '.join(stale)}; run make generate", file=sys.stderr)
            return 1
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in generate(Path(tmp)):
            shutil.copyfile(path, WIRE / path.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
