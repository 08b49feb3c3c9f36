#!/usr/bin/env bash
# Build kube-apiserver, kube-scheduler, kube-controller-manager and etcd from the Go module proxy into a
# cache folder, once. kube-controller-manager (for its resourceclaim controller, DRA tests) is built on its own
# when a cache from before it was added lacks it.
# The Kubernetes version is pinned in hack/controlplane/VERSION; etcd follows that release's go.mod.
# KUBEBUILDER_ASSETS (a folder holding the three binaries) skips the build entirely.
# Prints the folder with the binaries on its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(tr -d '[:space:]' < "$here/controlplane/VERSION")"
minor="0.${version#1.}"

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  for b in kube-apiserver etcd; do
    [[ -x "$KUBEBUILDER_ASSETS/$b" ]] || { echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no $b" >&2; exit 1; }
  done
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

cache="${KSCHED_CACHE:-$HOME/.cache/ksched}/controlplane/$version"
bin="$cache/bin"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${version#1.}"
if [[ -x "$bin/kube-apiserver" && -x "$bin/kube-scheduler" && -x "$bin/etcd" && -x "$bin/kube-controller-manager" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { echo "go is not installed: install Go >= 1.25 (apt-get install golang-go)" >&2; exit 1; }

mod="$here/controlplane"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$mod/go.mod" "$mod/tools.go" "$work/"
[[ -f "$mod/go.sum" ]] && cp "$mod/go.sum" "$work/"
start=$(date +%s)
echo "building Kubernetes v$version control plane into $bin (first time only; takes a while on 2 cores)" >&2
cd "$work"
export GOFLAGS="-mod=mod" CGO_ENABLED=0
go mod download >&2
mkdir -p "$bin.tmp"
if [[ -x "$bin/kube-apiserver" && -x "$bin/kube-scheduler" && -x "$bin/etcd" ]]; then
  # an existing cache without kube-controller-manager: add it only
  go build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" k8s.io/kubernetes/cmd/kube-controller-manager >&2
  mv "$bin.tmp/kube-controller-manager" "$bin/" && rm -rf "$bin.tmp"
  echo "built kube-controller-manager in $(( $(date +%s) - start ))s" >&2
  echo "$bin"
  exit 0
fi
go build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager >&2
go build -trimpath -ldflags "-s -w" -o "$bin.tmp/etcd" go.etcd.io/etcd/server/v3 >&2
rm -rf "$bin" && mv "$bin.tmp" "$bin"
echo "built in $(( $(date +%s) - start ))s (staging modules v$minor)" >&2
echo "$bin"
