#!/usr/bin/env bash
# Moves one tool module to another version and regenerates its go.sum: the only way a tool's
# version changes (make tools-update TOOL=kubernetes VERSION=v1.37.2). Commit both files.
#
# Kubernetes also moves its staging modules (k8s.io/api, client-go, ...) to the matching v0.Y.Z,
# because its own go.mod points them at folders of its source tree that a module cannot reach.
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tool="${1:?usage: update.sh TOOL VERSION}"
version="${2:?usage: update.sh TOOL VERSION}"
[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "version must look like v1.2.3" >&2; exit 1; }

case "$tool" in
  etcd) module=go.etcd.io/etcd/server/v3 ;;
  kubernetes|kubernetes-1.*) module=k8s.io/kubernetes ;;
  helm) module=helm.sh/helm/v4 ;;
  containerd) module=github.com/containerd/containerd/v2 ;;
  cdi) module=tags.cncf.io/container-device-interface ;;
  kube-rbac-proxy) module=github.com/brancz/kube-rbac-proxy ;;
  prometheus) module=github.com/prometheus/prometheus ;;
  nvidia-cdi-hook) module=github.com/NVIDIA/nvidia-container-toolkit ;;
  devicemetadata) module=k8s.io/dynamic-resource-allocation ;;
  prometheus-operator) module=github.com/prometheus-operator/prometheus-operator ;;
  kueue) module=sigs.k8s.io/kueue ;;
  *) echo "unknown tool '$tool'" >&2; exit 1 ;;
esac

if [[ "$tool" == kubernetes-1.* && "$version" != "v${tool#kubernetes-}."* ]]; then
  echo "$tool pins a release of Kubernetes ${tool#kubernetes-}, not $version" >&2; exit 1
fi

cd "$HERE/$tool"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
if [[ "$tool" == kubernetes* ]]; then
  staging="v0.${version#v1.}"
  go mod download "$module@$version"
  upstream="$(go env GOMODCACHE)/cache/download/$module/@v/$version.mod"
  # Replace every staging module the release maps to ./staging with its published version.
  while read -r staged; do
    go mod edit -replace "$staged=$staged@$staging"
  done < <(sed -n '/^replace (/,/^)/p' "$upstream" | awk '$2 == "=>" && $3 ~ /^\.\/staging/ { print $1 }')
fi
go mod edit -require "$module@$version"
go mod tidy
echo "$tool is now at $version: review and commit $HERE/$tool/go.mod and go.sum"
