#!/usr/bin/env bash
# The hardware tier on a GPU machine without network, from the folder test/hardware/device-carry.sh
# assembled (default .hw/ in the checkout): installs the wheels into /tmp/site ($HW_SITE), puts a static
# busybox at /bin/busybox when the machine has none, points the tier at the carried tools, loader
# packages and probes, and runs it read-only (extra arguments go to pytest). The log goes to
# $OUT/hardware-tier.log when $OUT is set; the run ends with the checks' one-line results.
set -Eeuo pipefail
cd "$(dirname "$0")/../.."
HW="$(realpath "${HW:-.hw}")"
SITE="${HW_SITE:-/tmp/site}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$HW"/*.whl
export PYTHONPATH="$SITE" PYTHONUNBUFFERED=1
# the root needs a static busybox (a dynamic one is refused): the carried one where there is none
if ! [ -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then install -m 0755 "$HW/busybox" /bin/busybox; fi
export GPU_CP_BIN_DIR="$HW" GPU_CP_RUNC="$HW/runc" PATH="$HW:$PATH"
export GPU_CP_LOADER_DEBS="$HW/graphics/debs" GPU_CP_PROBE_PROGRAMS="$HW/graphics/probes"
nvidia-smi --query-gpu=name,driver_version,mig.mode.current --format=csv,noheader || true
set -o pipefail
python3 -m pytest test/hardware --confcutdir=test/hardware -q -p no:randomly -p no:cacheprovider "$@" 2>&1 |
  tee "${OUT:-/tmp}/hardware-tier.log"
