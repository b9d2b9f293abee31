#!/usr/bin/env bash
# Assembles what a GPU machine without network needs for the hardware tier, in one folder that
# travels with the working tree (default .hw/, kept out of git by .git/info/exclude): the project's
# wheel and its dependencies' wheels for the machine's Python (3.12, manylinux x86-64), the built
# tools (cdi-validate, nvidia-cdi-hook), runc and a static busybox from this host, and for the
# graphics checks the loaders' Debian packages (test/hardware/graphics/loader-packages.txt) and the
# probes built here with gcc. Run here, with the network, after `make install tools`; then run
# test/hardware/device-run.sh there (docs/testing.md, "The hardware tier").
set -Eeuo pipefail
cd "$(dirname "$0")/../.."
HW="${1:-.hw}"
PY="${HW_PYTHON_VERSION:-3.12}"
mkdir -p "$HW/graphics/debs" "$HW/graphics/probes"
grep -qxF "/$HW/" .git/info/exclude 2>/dev/null || echo "/$HW/" >>.git/info/exclude

rm -f "$HW"/*.whl
.venv/bin/pip wheel -q --no-deps -w "$HW" .
platforms=()
for n in 17 27 28; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
.venv/bin/pip download -q --only-binary=:all: --python-version "$PY" --implementation cp "${platforms[@]}" \
  -c requirements/constraints.txt -d "$HW" "$HW"/gpu_control_plane-*.whl
# Left behind to stay under the device tool's 64 MiB: packages the machine's image already holds
# (its PyTorch stack brings them), none of which the tier needs at a newer version.
for name in ${HW_IMAGE_HAS:-grpcio aiohttp aiosignal frozenlist multidict yarl propcache aiohappyeyeballs \
  attrs idna certifi urllib3 requests charset_normalizer typing_extensions six}; do
  rm -f "$HW/$name"-*.whl
done

bin="$(bash hack/tools/build.sh --print-dir --cached-only)"
cp -L "$bin/cdi-validate" "$bin/nvidia-cdi-hook" "$HW/"
cp -L "$(command -v runc)" "$HW/runc"
cp -L /bin/busybox "$HW/busybox"

.venv/bin/python - "$HW" <<'PY'
import sys
from pathlib import Path

from pkg.hardwaretier.loader_packages import ensure_debs, read_pins
from pkg.hardwaretier.probes import build_probes, find_compiler

hw = Path(sys.argv[1])
graphics = Path("test/hardware/graphics")
debs = ensure_debs(hw / "graphics" / "debs", read_pins(graphics / "loader-packages.txt"))
compiler = find_compiler()
if compiler is None:
    sys.exit("no gcc here: install gcc and libc6-dev")
probes = build_probes(compiler, source_dir=graphics, output_dir=hw / "graphics" / "probes")
print(f"{len(debs)} loader packages, {len(probes)} probes")
PY
du -sh "$HW"
