#!/usr/bin/env bash
# A real Kubernetes node for the static-pod end-to-end tests (tests/node/): kubelet of the control plane's
# version, containerd + runc + the CNI plugins from the distribution, and the images the node runs without a
# registry. Idempotent: each step is skipped when its result is there, so `make test` calls it every time.
#
#   1. apt: containerd, runc, containernetworking-plugins (when missing)
#   2. kubelet v$(hack/controlplane/VERSION), built from Go modules like the control plane (hack/build-kubelet.sh)
#   3. crictl (sigs.k8s.io/cri-tools, pinned), to remove pod sandboxes through the CRI at teardown
#   4. image tarballs (docker-archive, imported later with `ctr -n k8s.io images import`) in $cache/images:
#        pause.tar           localhost/ksched-test/pause:1   a static Go binary that waits for a signal (sandbox image)
#        kube-scheduler.tar  registry.k8s.io/kube-scheduler:v$VERSION  the control-plane build's own kube-scheduler
#      (the ksched image itself is built by the tests with `ksched build --load-into containerd`, on podman)
#
# Prints the cache folder on its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(tr -d '[:space:]' < "$here/controlplane/VERSION")"
cache="${KSCHED_CACHE:-$HOME/.cache/ksched}/node/$version"
say() { echo "install-node: $*" >&2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    say "need root (or sudo): the kubelet and containerd run as root"; exit 1
  fi
fi

# ---------------------------------------------------------------------------------------------- 1. packages
need=()
command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ] \
  || need+=(containernetworking-plugins)
if [ ${#need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || { say "apt-get not found; install ${need[*]} with your package manager"; exit 1; }
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # the package's service (where systemd runs) would own /run/containerd; the tests run their own containerd
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now containerd.service >/dev/null 2>&1 || true
  fi
else
  say "containerd $(containerd --version | awk '{print $3}'), runc and the CNI plugins already installed"
fi

# ---------------------------------------------------------------------------------------------- 2. kubelet
kubelet="$(bash "$here/build-kubelet.sh" | tail -n 1)"
say "kubelet: $kubelet"

# ---------------------------------------------------------------------------------------------- 3. crictl
# the tests remove pod sandboxes through the CRI at teardown (Debian has no cri-tools package); pinned
crictl_version=v1.37.0
if [ ! -x "$cache/bin/crictl" ]; then
  command -v go >/dev/null || { say "go is not installed (it builds crictl)"; exit 1; }
  say "building crictl $crictl_version (about 2 minutes, once)"
  GOBIN="$cache/bin" CGO_ENABLED=0 go install "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version" >&2
fi

# ---------------------------------------------------------------------------------------------- 4. images
mkdir -p "$cache/images"
if [ ! -f "$cache/images/pause.tar" ]; then
  command -v go >/dev/null || { say "go is not installed (it builds the pause image)"; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$here/node/pause" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags '-s -w' -o "$tmp/pause" .)
  python3 "$here/node/mkimage.py" "$cache/images/pause.tar.tmp" localhost/ksched-test/pause:1 /pause \
    "$tmp/pause:/pause"
  mv "$cache/images/pause.tar.tmp" "$cache/images/pause.tar"
  say "built localhost/ksched-test/pause:1"
fi
sched_bin="$(bash "$here/build-controlplane.sh" | tail -n 1)/kube-scheduler"
if [ ! -f "$cache/images/kube-scheduler.tar" ] || [ "$sched_bin" -nt "$cache/images/kube-scheduler.tar" ]; then
  [ -x "$sched_bin" ] || { say "no kube-scheduler at $sched_bin: run hack/build-controlplane.sh"; exit 1; }
  python3 "$here/node/mkimage.py" "$cache/images/kube-scheduler.tar.tmp" "registry.k8s.io/kube-scheduler:v$version" \
    /usr/local/bin/kube-scheduler "$sched_bin:/usr/local/bin/kube-scheduler"
  mv "$cache/images/kube-scheduler.tar.tmp" "$cache/images/kube-scheduler.tar"
  say "built registry.k8s.io/kube-scheduler:v$version from $sched_bin"
fi
echo "$cache"
