#!/usr/bin/env bash
# Builds the real Kubernetes control plane used by integration tests and `make demo`:
# etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and helm, from the Go
# module proxy, into a cache folder keyed by version.
#
# Why a throwaway module per project: k8s.io/kubernetes maps its k8s.io/* staging modules to local
# folders (replace => ./staging/...) and etcd's server module has relative replace lines, so neither
# builds with `go install pkg@version`. A module of our own that requires the release and replaces
# each staging module with its published v0.Y.Z resolves the same sources without a git checkout.
#
# Usage: hack/build-control-plane.sh [--print-dir]
#   --print-dir   print the folder holding the binaries (building them first if needed)
# Environment: GPU_CP_CACHE_DIR (default: ${XDG_CACHE_HOME:-~/.cache}/gpu-control-plane)
set -Eeuo pipefail

# v1.37.2 is listed by the proxy but its source zip is not served (403): 1.37.1 is the newest that builds.
KUBE_VERSION="${KUBE_VERSION:-v1.37.1}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
HELM_VERSION="${HELM_VERSION:-v4.3.1}"
CACHE_DIR="${GPU_CP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-control-plane}"
BIN_DIR="$CACHE_DIR/bin/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_helm-${HELM_VERSION}"
WORK_DIR="$CACHE_DIR/work"
mkdir -p "$CACHE_DIR"

print_dir_only=false
[[ "${1:-}" == "--print-dir" ]] && print_dir_only=true

step=""
log() { if ! $print_dir_only; then echo "[build-control-plane] $*"; else echo "[build-control-plane] $*" >&2; fi; }
GO_LOG="$CACHE_DIR/build.log"
on_error() {
  echo "[build-control-plane] FAILED at step: ${step}" >&2
  [[ -f "$GO_LOG" ]] && tail -n 30 "$GO_LOG" >&2
}
trap on_error ERR

export CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

have() { [[ -x "$BIN_DIR/$1" ]]; }

build_kubernetes() {
  local minor major mod dir ldflags build_date
  major="$(echo "$KUBE_VERSION" | sed -E 's/^v([0-9]+)\..*/\1/')"
  minor="$(echo "$KUBE_VERSION" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/')"
  dir="$WORK_DIR/kubernetes-$KUBE_VERSION"
  mkdir -p "$dir"
  step="kubernetes: fetch go.mod of k8s.io/kubernetes@$KUBE_VERSION"
  log "$step"
  go mod download "k8s.io/kubernetes@$KUBE_VERSION" >>"$GO_LOG" 2>&1
  mod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBE_VERSION.mod"
  step="kubernetes: write throwaway module replacing staging modules with v0.$minor.${KUBE_VERSION##*.}"
  log "$step"
  {
    echo "module gpu-control-plane/hack/kubernetes-build"
    echo
    echo "go $(sed -n 's/^go \(.*\)/\1/p' "$mod")"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    echo "replace ("
    sed -n '/^replace (/,/^)/p' "$mod" | grep -E '^\s+k8s\.io/[a-z0-9-]+ => \./staging' \
      | awk -v v="v0.$minor.${KUBE_VERSION##*.}" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$dir/go.mod"
  step="kubernetes: resolve dependencies (go get)"
  log "$step"
  (cd "$dir" && go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kubectl >>"$GO_LOG" 2>&1)
  build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  step="kubernetes: go build kube-apiserver kube-scheduler kube-controller-manager kubectl"
  log "$step (first build takes a while on 2 cores)"
  mkdir -p "$BIN_DIR.tmp"
  (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR.tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl >>"$GO_LOG" 2>&1)
}

build_etcd() {
  local dir="$WORK_DIR/etcd-$ETCD_VERSION"
  mkdir -p "$dir" "$BIN_DIR.tmp"
  step="etcd: resolve go.etcd.io/etcd/server/v3@$ETCD_VERSION in a throwaway module"
  log "$step"
  printf 'module gpu-control-plane/hack/etcd-build\n\ngo 1.25.0\n' >"$dir/go.mod"
  (cd "$dir" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >>"$GO_LOG" 2>&1)
  step="etcd: go build"
  log "$step"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN_DIR.tmp/etcd" go.etcd.io/etcd/server/v3 >>"$GO_LOG" 2>&1)
}

build_helm() {
  local dir="$WORK_DIR/helm-$HELM_VERSION" major="${HELM_VERSION%%.*}"
  mkdir -p "$dir" "$BIN_DIR.tmp"
  step="helm: resolve helm.sh/helm/$major@$HELM_VERSION"
  log "$step"
  printf 'module gpu-control-plane/hack/helm-build\n\ngo 1.26.0\n' >"$dir/go.mod"
  (cd "$dir" && go get "helm.sh/helm/$major/cmd/helm@$HELM_VERSION" >>"$GO_LOG" 2>&1)
  step="helm: go build"
  log "$step"
  (cd "$dir" && go build -trimpath \
      -ldflags "-s -w -X helm.sh/helm/$major/internal/version.version=$HELM_VERSION" \
      -o "$BIN_DIR.tmp/helm" "helm.sh/helm/$major/cmd/helm" >>"$GO_LOG" 2>&1)
}

main() {
  local start=$SECONDS
  if have kube-apiserver && have kube-scheduler && have kube-controller-manager && have kubectl \
      && have etcd && have helm; then
    log "cached: $BIN_DIR"
  else
    step="check go toolchain"
    command -v go >/dev/null || { echo "[build-control-plane] go is not installed" >&2; exit 1; }
    rm -rf "$BIN_DIR.tmp"
    [[ -d "$BIN_DIR" ]] && cp -a "$BIN_DIR" "$BIN_DIR.tmp"
    [[ -x "$BIN_DIR.tmp/etcd" ]] || build_etcd
    [[ -x "$BIN_DIR.tmp/kube-apiserver" && -x "$BIN_DIR.tmp/kubectl" ]] || build_kubernetes
    [[ -x "$BIN_DIR.tmp/helm" ]] || build_helm
    step="verify versions"
    "$BIN_DIR.tmp/kube-apiserver" --version | grep -q "$KUBE_VERSION"
    "$BIN_DIR.tmp/etcd" --version | grep -q "${ETCD_VERSION#v}"
    rm -rf "$BIN_DIR" && mv "$BIN_DIR.tmp" "$BIN_DIR"
    log "built into $BIN_DIR in $((SECONDS - start))s"
  fi
  if $print_dir_only; then echo "$BIN_DIR"; fi
}

main
