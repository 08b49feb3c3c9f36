#!/usr/bin/env bash
# Build the previous minor's kube-scheduler (hack/controlplane-prev/VERSION), the oracle of ksched's
# `--emulated-version <previous minor>` parity tests, from the Go module proxy, once, into
# $KSCHED_CACHE/controlplane/<that version>/bin. Only kube-scheduler: a cold machine builds nothing else of that
# release (it shares the Go build cache with hack/build-controlplane.sh). A cache that already holds the whole
# control plane of that version (a machine that pinned it before) is used as it is.
# KSCHED_PREV_SCHEDULER (a kube-scheduler binary) skips the build. Prints the binary's path on its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(tr -d '[:space:]' < "$here/controlplane-prev/VERSION")"

if [[ -n "${KSCHED_PREV_SCHEDULER:-}" ]]; then
  [[ -x "$KSCHED_PREV_SCHEDULER" ]] || { echo "KSCHED_PREV_SCHEDULER=$KSCHED_PREV_SCHEDULER is not an executable file" >&2; exit 1; }
  echo "$KSCHED_PREV_SCHEDULER"
  exit 0
fi

bin="${KSCHED_CACHE:-$HOME/.cache/ksched}/controlplane/$version/bin"
if [[ -x "$bin/kube-scheduler" ]]; then
  echo "$bin/kube-scheduler"
  exit 0
fi
command -v go >/dev/null || { echo "go is not installed: install Go >= 1.25 (apt-get install golang-go)" >&2; exit 1; }

mod="$here/controlplane-prev"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "$work/"
mkdir -p "$bin"
start=$(date +%s)
echo "building kube-scheduler v$version (previous minor, for emulated-version parity) into $bin (first time only)" >&2
cd "$work"
export GOFLAGS="-mod=mod" CGO_ENABLED=0
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${version#1.}"
go build -trimpath -ldflags "$ldflags" -o "$work/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler >&2
mv "$work/kube-scheduler" "$bin/kube-scheduler.tmp" && mv "$bin/kube-scheduler.tmp" "$bin/kube-scheduler"
echo "built kube-scheduler v$version in $(( $(date +%s) - start ))s" >&2
echo "$bin/kube-scheduler"
