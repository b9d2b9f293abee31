#!/usr/bin/env bash
# Builds the tools the tests and the demo run (etcd, the Kubernetes binaries, helm, containerd,
# the CDI spec validator, promtool and the Prometheus server, kube-rbac-proxy, NVIDIA's CDI hook,
# Kubernetes' device metadata reader, Kueue's controller manager) and takes the Prometheus
# Operator's and Kueue's CRDs from the modules committed beside this script, into a cache keyed
# by what was built. The control plane of the oldest Kubernetes release we support
# (kubernetes-1.34) is built only when named: the DRA integration tests run against it too, the
# demo never needs it.
#
# Why committed modules: each tool is a module of ours (hack/tools/<tool>/go.mod and go.sum) whose
# `tool` lines name the commands to build. Builds run with -mod=readonly, so what builds is exactly
# what go.sum pins: a new release on the module proxy can neither change nor break it. Kubernetes
# maps its staging modules to local folders, so its module replaces them with their published
# v0.Y.Z; etcd's server module is required directly; the CDI validator and the device metadata
# reader are main packages of ours over the CDI project's loader and Kubernetes' devicemetadata
# package. Files a tool takes from its module (CRDs, module_files) are copied from the module as
# downloaded and checked against go.sum, into a folder of the tool's cache beside its binaries. Bump a tool with `make tools-update`.
#
# Cache: $GPU_CP_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/gpu-control-plane)
#   tools/<tool>-<version>-<key>/          finished binaries of one tool (key: hash of its go.mod,
#                                          go.sum and build recipe), never modified once complete
#   tools/<tool>-<version>-<key>.partial/  a build in progress: every binary that finished stays,
#                                          so a failed or killed build resumes where it stopped
#   bin/<set>/                             links to every tool's binaries: the folder callers use
# One lock serialises builds, so parallel callers (pytest workers, two make targets) wait instead
# of racing.
#
# Usage: hack/tools/build.sh [--print-dir] [--cached-only] [--bin-dir DIR] [--check] [TOOL...]
#   (no TOOL)      every tool but the older Kubernetes releases (OLDER_KUBERNETES: name them)
#   --print-dir    print the bin folder on stdout (progress goes to stderr)
#   --cached-only  never build: fail with a hint if a tool is missing (for test fixtures)
#   --bin-dir DIR  build into DIR instead of the cache (CI's link-only rebuild of the set-up path)
#   --check        verify each module against its committed go.sum and that go.mod is tidy
#                  (no TOOL: the older Kubernetes releases too)
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ALL_TOOLS=(etcd kubernetes helm containerd cdi prometheus kube-rbac-proxy nvidia-cdi-hook devicemetadata
           prometheus-operator kueue)
# The control plane of an older Kubernetes release, in a bin set of its own (the binaries keep
# their names): `--print-dir kubernetes-1.34` is the folder the integration tier's second pass
# starts its apiserver, scheduler and controller manager from.
OLDER_KUBERNETES=(kubernetes-1.34)
CACHE_DIR="${GPU_CP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-control-plane}"
# Changing how a tool is built (flags, tags) must change its cache key: bump this.
RECIPE_REVISION=1

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false -trimpath"

log() { echo "[tools] $*" >&2; }
die() { echo "[tools] error: $*" >&2; exit 1; }

# --- recipes: the binaries of each tool, their packages and how they are stamped ----------------
module_version() { # the version of module $2 required by tool $1's go.mod
  awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$HERE/$1/go.mod"
}

binaries() {
  case "$1" in
    etcd) echo "etcd=go.etcd.io/etcd/server/v3" ;;
    kubernetes)
      local c
      for c in kube-apiserver kube-scheduler kube-controller-manager kubectl kubelet; do
        echo "$c=k8s.io/kubernetes/cmd/$c"
      done ;;
    kubernetes-1.*)
      local c
      for c in kube-apiserver kube-scheduler kube-controller-manager; do
        echo "$c=k8s.io/kubernetes/cmd/$c"
      done ;;
    helm) echo "helm=helm.sh/helm/v4/cmd/helm" ;;
    containerd)
      local c
      for c in containerd ctr containerd-shim-runc-v2; do
        echo "$c=github.com/containerd/containerd/v2/cmd/$c"
      done ;;
    cdi) echo "cdi-validate=gpu-control-plane/hack/tools/cdi" ;;
    kube-rbac-proxy) echo "kube-rbac-proxy=github.com/brancz/kube-rbac-proxy/cmd/kube-rbac-proxy" ;;
    prometheus)
      echo "promtool=github.com/prometheus/prometheus/cmd/promtool"
      echo "prometheus=github.com/prometheus/prometheus/cmd/prometheus" ;;
    nvidia-cdi-hook) echo "nvidia-cdi-hook=github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook" ;;
    devicemetadata) echo "devicemetadata=gpu-control-plane/hack/tools/devicemetadata" ;;
    prometheus-operator) ;; # files only (module_files)
    kueue) echo "kueue=sigs.k8s.io/kueue/cmd/kueue" ;;
    *) die "unknown tool '$1' (known: ${ALL_TOOLS[*]} ${OLDER_KUBERNETES[*]})" ;;
  esac
}

tool_version() {
  case "$1" in
    etcd) module_version etcd go.etcd.io/etcd/server/v3 ;;
    kubernetes|kubernetes-1.*) module_version "$1" k8s.io/kubernetes ;;
    helm) module_version helm helm.sh/helm/v4 ;;
    containerd) module_version containerd github.com/containerd/containerd/v2 ;;
    cdi) module_version cdi tags.cncf.io/container-device-interface ;;
    kube-rbac-proxy) module_version kube-rbac-proxy github.com/brancz/kube-rbac-proxy ;;
    prometheus) module_version prometheus github.com/prometheus/prometheus ;;
    nvidia-cdi-hook) module_version nvidia-cdi-hook github.com/NVIDIA/nvidia-container-toolkit ;;
    devicemetadata) module_version devicemetadata k8s.io/dynamic-resource-allocation ;;
    prometheus-operator) module_version prometheus-operator github.com/prometheus-operator/prometheus-operator ;;
    kueue) module_version kueue sigs.k8s.io/kueue ;;
  esac
}

module_files() { # "<module> <folder in it> <folder in the tool's cache>" for the files a tool
  # takes from its module as they are (CRDs), copied beside its binaries
  case "$1" in
    prometheus-operator)
      echo "github.com/prometheus-operator/prometheus-operator example/prometheus-operator-crd prometheus-operator-crd" ;;
    kueue) echo "sigs.k8s.io/kueue config/components/crd/bases kueue-crd" ;;
  esac
}

release_of() { # the version a tool's binaries report: Prometheus module v0.3YY.Z is release 3.YY.Z
  local minor patch
  case "$1" in
    prometheus)
      minor="${2#v0.3}"; patch="${minor#*.}"; minor="${minor%%.*}"
      echo "3.$((10#$minor)).$patch" ;;
    *) echo "$2" ;;
  esac
}

build_args() { # go build arguments (one per line) for tool $1 at version $2
  local tool="$1" version="$2" ldflags="-s -w"
  case "$tool" in
    kubernetes|kubernetes-1.*)
      local major minor pkg
      major="${version#v}"; major="${major%%.*}"
      minor="${version#v*.}"; minor="${minor%%.*}"
      # A fixed build date keeps rebuilds byte-identical; the version is what tests check.
      for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
      done ;;
    helm) ldflags+=" -X helm.sh/helm/v4/internal/version.version=$version" ;;
    kueue) ldflags+=" -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" ;;
    kube-rbac-proxy)
      # Its --version prints the component-base version, as the upstream Makefile stamps it.
      ldflags+=" -X k8s.io/component-base/version.gitVersion=$version" ;;
    containerd)
      ldflags+=" -X github.com/containerd/containerd/v2/version.Version=$version"
      echo "-tags=no_btrfs,no_devmapper,no_zfs,no_aufs" ;;
    prometheus)
      # Module v0.3YY.Z is Prometheus 3.YY.Z. promtool only checks and tests rules here and the
      # server scrapes static targets, so the service-discovery plugins (every cloud SDK) are left
      # out: a third of the build time. The server has no built-in web UI assets (its HTTP API is
      # all the tests read).
      ldflags+=" -X github.com/prometheus/common/version.Version=$(release_of "$tool" "$version")"
      echo "-tags=remove_all_sd" ;;
    nvidia-cdi-hook)
      # Its NVML binding is cgo (NVML itself is opened at run time, and only by hooks we do not
      # use). Linked statically: the hook runs on the host, whose C library we do not know.
      ldflags+=" -X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=$version"
      ldflags+=" -linkmode=external -extldflags=-static"
      echo "-tags=osusergo,netgo" ;;
  esac
  echo "-ldflags=$ldflags"
}

cgo_of() { # 1 for the tools that need cgo (a C compiler), 0 for the rest
  case "$1" in
    nvidia-cdi-hook) echo 1 ;;
    *) echo 0 ;;
  esac
}

cgo_key() { # what cgo adds to a tool's cache key: nothing for the pure-Go tools, so their keys stay
  [[ "$(cgo_of "$1")" == 0 ]] || echo "cgo CGO_CFLAGS=-O2 -Wno-deprecated-declarations"
}

version_probe() { # the command line that prints binary $1's version, or nothing
  case "$1" in
    kube-apiserver|kube-scheduler|kube-controller-manager|kubelet) echo "--version" ;;
    kubectl) echo "version --client" ;;
    etcd|containerd) echo "--version" ;;
    helm) echo "version --short" ;;
    kube-rbac-proxy) echo "--version" ;;
    promtool|prometheus) echo "--version" ;;
    nvidia-cdi-hook) echo "--version" ;;
  esac
}

# --- cache keys ---------------------------------------------------------------------------------
tool_key() { # <tool>-<version>-<hash of go.mod, go.sum and recipe>
  local tool="$1" version hash
  version="$(tool_version "$tool")"
  [[ -n "$version" ]] || die "$HERE/$tool/go.mod names no version of the tool"
  hash="$( { cat "$HERE/$tool/go.mod" "$HERE/$tool/go.sum" "$HERE/$tool"/*.go 2>/dev/null; echo "$RECIPE_REVISION";
             binaries "$tool"; build_args "$tool" "$version"; cgo_key "$tool"; module_files "$tool"; } \
           | sha256sum | cut -c1-12)"
  echo "$tool-$version-$hash"
}

# --- building -----------------------------------------------------------------------------------
check_go() {
  command -v go >/dev/null || die "go is not installed (README: requirements)"
  local need have
  need="$(awk '$1 == "go" { print $2; exit }' "$HERE/$1/go.mod")"
  have="$(go env GOVERSION)"; have="${have#go}"
  [[ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" == "$need" ]] \
    || die "tool $1 needs Go $need or newer; this machine has $have (README: requirements)"
}

verify_version() { # binary path, expected version
  local bin="$1" want="$2" probe out
  probe="$(version_probe "$(basename "$bin")")"
  [[ -n "$probe" ]] || return 0
  # shellcheck disable=SC2086  # the probe is several words on purpose
  out="$("$bin" $probe 2>&1)" || die "$bin $probe failed: $out"
  [[ "$out" == *"${want#v}"* ]] || die "$bin reports '$out', expected $want"
}

build_tool() { # tool, destination folder (created; finished binaries in it are kept)
  local tool="$1" dest="$2" version line name pkg start=$SECONDS
  local -a args
  version="$(tool_version "$tool")"
  check_go "$tool"
  mapfile -t args < <(build_args "$tool" "$version")
  mkdir -p "$dest"
  while IFS= read -r line; do
    name="${line%%=*}"; pkg="${line#*=}"
    if [[ -x "$dest/$name" ]]; then continue; fi
    log "building $name $version (a first build from empty Go caches takes minutes on 2 cores)"
    # Into a temporary name first: a killed link never leaves a truncated binary that looks done.
    # The host-wide Go build lock: engineers sharing this machine never run two Go builds at once.
    (cd "$HERE/$tool" && CGO_ENABLED="$(cgo_of "$tool")" CGO_CFLAGS="-O2 -Wno-deprecated-declarations" flock /run/lock/gpucp-go-build.lock go build "${args[@]}" -o "$dest/.$name.tmp" "$pkg") \
      || die "go build of $pkg failed (module $HERE/$tool)"
    verify_version "$dest/.$name.tmp" "$(release_of "$tool" "$version")"
    mv -f "$dest/.$name.tmp" "$dest/$name"
  done < <(binaries "$tool")
  copy_module_files "$tool" "$dest"
  log "$tool $version built in $((SECONDS - start))s"
}

copy_module_files() { # tool, destination folder: the module's files the tool takes, as go.sum pins
  local tool="$1" dest="$2" module from to dir
  while read -r module from to; do
    [[ -n "$module" && ! -d "$dest/$to" ]] || continue
    # -mod=readonly: the download is checked against the committed go.sum.
    dir="$(cd "$HERE/$tool" && go mod download -json "$module" | awk -F'"' '$2 == "Dir" { print $4 }')"
    [[ -d "$dir/$from" ]] || die "$tool: $module has no folder $from"
    rm -rf "$dest/.$to.tmp" && mkdir -p "$dest/.$to.tmp"
    cp "$dir/$from"/*.yaml "$dest/.$to.tmp/" && chmod -R u+w "$dest/.$to.tmp"
    mv "$dest/.$to.tmp" "$dest/$to"
    log "$tool: $from of $module copied"
  done < <(module_files "$tool")
}

make_target() { # the make target that builds tool $1
  case "$1" in
    kubernetes-1.*) echo "tools-older-kubernetes" ;;
    *) echo "tools" ;;
  esac
}

ensure_tool() { # tool, cached-only flag; prints the folder holding its binaries
  local tool="$1" cached_only="$2" key dir
  key="$(tool_key "$tool")"
  dir="$CACHE_DIR/tools/$key"
  if [[ ! -d "$dir" ]]; then
    $cached_only && die "$tool is not built ($dir): run 'make $(make_target "$tool")'"
    build_tool "$tool" "$dir.partial"
    mv "$dir.partial" "$dir"
  fi
  echo "$dir"
}

link_set() { # links every binary of the given tool folders into one folder; prints it
  local set dir bin
  set="$(printf '%s\n' "$@" | sha256sum | cut -c1-12)"
  dir="$CACHE_DIR/bin/$set"
  if [[ ! -d "$dir" ]]; then
    mkdir -p "$dir.tmp"
    for tool_dir in "$@"; do
      for bin in "$tool_dir"/*; do ln -sf "$bin" "$dir.tmp/$(basename "$bin")"; done
    done
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

check_module() { # go.sum covers every package the tool builds, and go.mod/go.sum are tidy
  local tool="$1" line
  local -a pkgs=()
  check_go "$tool"
  while IFS= read -r line; do pkgs+=("${line#*=}"); done < <(binaries "$tool")
  ((${#pkgs[@]})) || pkgs=(tool)  # a files-only tool: the command its go.mod names
  (cd "$HERE/$tool" && go mod verify >/dev/null) || die "$tool: module cache differs from go.sum"
  (cd "$HERE/$tool" && go list -deps "${pkgs[@]}" >/dev/null) \
    || die "$tool: go.mod/go.sum do not cover the packages it builds"
  (cd "$HERE/$tool" && GOFLAGS=-mod=mod go mod tidy -diff >/dev/null) \
    || die "$tool: go.mod/go.sum are not tidy: run 'make tools-update TOOL=$tool'"
  log "$tool: go.mod and go.sum verified"
}

main() {
  local print_dir=false cached_only=false check=false bin_dir="" tool
  local -a tools=() dirs=()
  while (($#)); do
    case "$1" in
      --print-dir) print_dir=true ;;
      --cached-only) cached_only=true ;;
      --check) check=true ;;
      --bin-dir) bin_dir="${2:?--bin-dir needs a folder}"; shift ;;
      -h|--help) sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      -*) die "unknown option $1" ;;
      *) binaries "$1" >/dev/null; tools+=("$1") ;;
    esac
    shift
  done
  local every=false
  ((${#tools[@]})) || { every=true; tools=("${ALL_TOOLS[@]}"); }

  if $check; then
    # Every committed module is verified, the older releases' too.
    ! $every || tools+=("${OLDER_KUBERNETES[@]}")
    for tool in "${tools[@]}"; do check_module "$tool"; done
    return
  fi
  if [[ -n "$bin_dir" ]]; then
    for tool in "${tools[@]}"; do build_tool "$tool" "$bin_dir"; done
    return
  fi

  mkdir -p "$CACHE_DIR/tools" "$CACHE_DIR/bin"
  exec {lock}>"$CACHE_DIR/.build.lock"
  flock "$lock"
  for tool in "${tools[@]}"; do dirs+=("$(ensure_tool "$tool" "$cached_only")"); done
  local set_dir
  set_dir="$(link_set "${dirs[@]}")"
  if $print_dir; then echo "$set_dir"; else log "tools ready in $set_dir"; fi
}

main "$@"
