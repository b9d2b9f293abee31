#!/usr/bin/env bash
# Installs the Debian packages listed in hack/host-packages.txt when any is missing: runc and the
# CNI plugins for the real test nodes, busybox-static for the images they run, debootstrap for the
# project image (make image-archive, the e2e chart tests). Needs root (or
# sudo); does nothing, quickly, when everything is installed at an accepted version.
set -Eeuo pipefail
cd "$(dirname "$0")"
missing=()
while read -r pkg pattern; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  have="$(dpkg-query -W -f '${Status} ${Version}' "$pkg" 2>/dev/null || true)"
  # shellcheck disable=SC2053  # the pattern is a glob on purpose
  if [[ "$have" == "install ok installed "* && "${have##* }" == $pattern ]]; then continue; fi
  missing+=("$pkg=$pattern")
done < host-packages.txt
((${#missing[@]})) || exit 0
sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "[host-packages] need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "[host-packages] installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
