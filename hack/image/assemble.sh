#!/bin/sh
# The steps that build the gpu-control-plane image, shared by both paths that build it:
#   * the Containerfile (make image), inside debian:bookworm-slim stages, where a registry is
#     reachable;
#   * pkg/devcluster/projectimage.py (tests, make demo), inside a Debian root made with debootstrap
#     from the Debian archive and entered with chroot, where no registry is.
# Both read hack/image/packages.txt, so the two images hold the same packages, the same virtualenv
# and the same files.
#
# Usage: assemble.sh packages <stage>     the packages of <stage> (one per line, for apt/debootstrap)
#        assemble.sh install <stage>      apt-get install them (the Containerfile's stages)
#        assemble.sh wheels <source> <out>  the project's wheel and its dependencies' wheels, as pinned by
#                                          requirements/constraints.txt (pip: $PIP, default pip)
#        assemble.sh venv <wheel folder>  the virtualenv at $VENV from the wheels, without pip
#        assemble.sh slim                 remove what the image never reads (docs, apt lists, caches)
set -eu
HERE="$(cd "$(dirname "$0")" && pwd)"
VENV=/opt/gpu-control-plane

packages() { awk -v s="$1" '$1 == s { print $2 }' "$HERE/packages.txt"; }

case "${1:-}" in
  packages) packages "${2:?stage}" ;;
  install)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2046  # one word per package
    apt-get install -y -qq --no-install-recommends $(packages "${2:?stage}") >/dev/null ;;
  wheels)
    src="${2:?source}" out="${3:?out}" pip="${PIP:-pip}"
    mkdir -p "$out"
    "$pip" wheel --quiet --no-deps --wheel-dir "$out" "$src"
    "$pip" download --quiet --only-binary=:all: --dest "$out" -c "$src/requirements/constraints.txt" \
      "$out"/gpu_control_plane-*.whl ;;
  venv)
    wheels="${2:?wheel folder}"
    python3 -m venv "$VENV"
    # Only the wheels given, nothing from an index: what is installed is what was downloaded
    # against requirements/constraints.txt.
    PIP_FIND_LINKS= "$VENV/bin/pip" install --quiet --no-index --no-cache-dir --find-links "$wheels" \
      gpu-control-plane
    # No installer in the final image: pip and setuptools came with the venv only.
    "$VENV/bin/pip" uninstall --quiet --yes pip setuptools ;;
  slim)
    rm -rf /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* \
      /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/log/* /root/.cache ;;
  *) echo "usage: $0 packages|install <stage> | wheels <src> <out> | venv <wheels> | slim" >&2; exit 2 ;;
esac
