#!/usr/bin/env bash
# Build the kubelet of the control plane's Kubernetes version (hack/controlplane/VERSION) from the Go module
# proxy, once, into the same cache folder as kube-apiserver & co. (hack/build-controlplane.sh): same module
# (hack/controlplane/go.mod), same flags, same Go build cache, so after the control plane it takes about a minute.
# KSCHED_KUBELET (a kubelet binary) skips the build. Prints the kubelet's path on its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(tr -d '[:space:]' < "$here/controlplane/VERSION")"

if [[ -n "${KSCHED_KUBELET:-}" ]]; then
  [[ -x "$KSCHED_KUBELET" ]] || { echo "KSCHED_KUBELET=$KSCHED_KUBELET is not an executable file" >&2; exit 1; }
  echo "$KSCHED_KUBELET"
  exit 0
fi

bin="${KSCHED_CACHE:-$HOME/.cache/ksched}/controlplane/$version/bin"
if [[ -x "$bin/kubelet" ]]; then
  echo "$bin/kubelet"
  exit 0
fi
command -v go >/dev/null || { echo "go is not installed: install Go >= 1.25 (apt-get install golang-go)" >&2; exit 1; }

mod="$here/controlplane"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "$work/"
mkdir -p "$bin"
start=$(date +%s)
echo "building kubelet v$version into $bin (first time only)" >&2
cd "$work"
# -mod=mod: kubelet needs a few modules the control plane's go.sum does not list; go adds them (checksum-verified)
export GOFLAGS="-mod=mod" CGO_ENABLED=0
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${version#1.}"
go build -trimpath -ldflags "$ldflags" -o "$work/kubelet" k8s.io/kubernetes/cmd/kubelet >&2
mv "$work/kubelet" "$bin/kubelet.tmp" && mv "$bin/kubelet.tmp" "$bin/kubelet"
echo "built kubelet in $(( $(date +%s) - start ))s" >&2
echo "$bin/kubelet"
