#!/usr/bin/env bash
# Build the kwok controller (sigs.k8s.io/kwok/cmd/kwok, pinned in hack/kwok/go.mod) from the Go module proxy
# into a cache folder, once, and copy beside it the stage files kwokctl uses by default: the kwok controller
# embeds no stages of its own, so `ksched dev-cluster up --nodes` hands these to it with --config.
#   bin/kwok                           the controller
#   stages/node-initialize.yaml        node -> Ready, phase Running, capacity kept (kustomize/stage/node/fast)
#   stages/node-heartbeat-with-lease.yaml  conditions refreshed; leases renewed by --node-lease-duration-seconds
#   stages/pod-ready.yaml, pod-complete.yaml, pod-delete.yaml  bound pods -> Running; jobs -> Succeeded; deletes
# KSCHED_KWOK_DIR (a folder laid out as above) skips the build. Prints the cache folder on its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(tr -d '[:space:]' < "$here/kwok/VERSION")"
grep -q "^require sigs.k8s.io/kwok v$version\$" "$here/kwok/go.mod" \
  || { echo "hack/kwok/VERSION ($version) does not match the sigs.k8s.io/kwok pin in hack/kwok/go.mod" >&2; exit 1; }
stages=(node-initialize.yaml node-heartbeat-with-lease.yaml pod-ready.yaml pod-complete.yaml pod-delete.yaml)

complete() {
  [[ -x "$1/bin/kwok" ]] || return 1
  for s in "${stages[@]}"; do [[ -f "$1/stages/$s" ]] || return 1; done
}

if [[ -n "${KSCHED_KWOK_DIR:-}" ]]; then
  complete "$KSCHED_KWOK_DIR" || { echo "KSCHED_KWOK_DIR=$KSCHED_KWOK_DIR lacks bin/kwok or stages/*.yaml" >&2; exit 1; }
  echo "$KSCHED_KWOK_DIR"
  exit 0
fi

cache="${KSCHED_CACHE:-$HOME/.cache/ksched}/kwok/$version"
if complete "$cache"; then
  echo "$cache"
  exit 0
fi
command -v go >/dev/null || { echo "go is not installed: install Go >= 1.26 (apt-get install golang-go)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work" "$cache.tmp"' EXIT
cp "$here/kwok/go.mod" "$here/kwok/go.sum" "$here/kwok/tools.go" "$work/"
start=$(date +%s)
echo "building kwok v$version into $cache (first time only)" >&2
cd "$work"
export GOFLAGS="-mod=mod" CGO_ENABLED=0
go mod download >&2
src="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
rm -rf "$cache.tmp" && mkdir -p "$cache.tmp/bin" "$cache.tmp/stages"
go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v$version" \
  -o "$cache.tmp/bin/kwok" sigs.k8s.io/kwok/cmd/kwok >&2
cp "$src/kustomize/stage/node/fast/node-initialize.yaml" \
   "$src/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
   "$src/kustomize/stage/pod/fast/pod-ready.yaml" "$src/kustomize/stage/pod/fast/pod-complete.yaml" \
   "$src/kustomize/stage/pod/fast/pod-delete.yaml" "$cache.tmp/stages/"
chmod -R u+w "$cache.tmp"
rm -rf "$cache" && mkdir -p "$(dirname "$cache")" && mv "$cache.tmp" "$cache"
echo "built kwok v$version in $(( $(date +%s) - start ))s" >&2
echo "$cache"
