#!/usr/bin/env bash
# Give the tests (and users without Docker) a container engine with a Docker-compatible socket, so that
# `ksched build` and tests/integration/test_build_image.py build and run real images. Idempotent: every step
# is skipped when its result is already there, so `make test` can call it every time.
#
#   1. apt: podman, runc, mmdebstrap (debootstrap if mmdebstrap is unavailable)
#   2. containers.conf drop-in: runtime runc and default ulimits within the hard limits. Both are needed on
#      hosts with a hybrid cgroup v1/v2 layout and no CAP_SYS_RESOURCE, where crun and podman's default
#      nofile=1048576 fail (see docs/build.md); harmless elsewhere.
#   3. `podman system service --time=0` on $KSCHED_PODMAN_SOCKET in the background, unless it answers already
#   4. a local base image with python3 + python3-venv ($KSCHED_BASE_IMAGE), built once from the apt mirror:
#      no container registry is needed
#   5. for the push tests: docker-registry and htpasswd (the test starts its own registry with password auth on
#      127.0.0.1:$KSCHED_TEST_REGISTRY_PORT, which a registries.conf drop-in lets podman reach over plain HTTP)
#
# Prints the DOCKER_HOST to use as its last line.
set -euo pipefail

SOCK_DIR=${KSCHED_PODMAN_DIR:-/run/ksched-podman}
SOCK=${KSCHED_PODMAN_SOCKET:-$SOCK_DIR/podman.sock}
BASE_IMAGE=${KSCHED_BASE_IMAGE:-localhost/ksched-base:bookworm}
SUITE=${KSCHED_BASE_SUITE:-bookworm}
CONF_DIR=/etc/containers/containers.conf.d
CONF=$CONF_DIR/50-ksched.conf
REG_CONF=/etc/containers/registries.conf.d/50-ksched-test-registry.conf
REG_PORT=${KSCHED_TEST_REGISTRY_PORT:-5056}
say() { echo "install-podman: $*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    say "need root (or sudo) to install podman and run its system service" >&2; exit 1
  fi
fi

# ---------------------------------------------------------------------------------------------- 1. packages
need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v mmdebstrap >/dev/null 2>&1 || command -v debootstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
if [ ${#need[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    say "apt-get not found; install ${need[*]} with your package manager, or point DOCKER_HOST at any" \
        "Docker-compatible engine" >&2
    exit 1
  fi
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  if ! $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
    # mmdebstrap is missing from older releases: debootstrap does the same job, slower
    need=("${need[@]/mmdebstrap/debootstrap}")
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  # --no-install-recommends skips these, and podman needs them for images and bridge networking
  $SUDO apt-get install -y -qq --no-install-recommends uidmap fuse-overlayfs netavark slirp4netns conmon \
    >/dev/null 2>&1 || true
  # the package enables a system-wide registry on :5000; the tests run their own
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
  fi
else
  say "podman, runc and a bootstrapper already installed"
fi

# ------------------------------------------------------------------------------------------ 2. containers.conf
hard_nofile=$(ulimit -Hn)
hard_nproc=$(ulimit -Hu)
# podman lowers its own RLIMIT_NPROC to 32768 before starting the runtime, which then cannot raise it again
if [ "$hard_nproc" = unlimited ] || [ "$hard_nproc" -gt 32768 ]; then hard_nproc=32768; fi
[ "$hard_nofile" = unlimited ] && hard_nofile=1048576
want=$(cat <<EOF
# written by ksched hack/install-podman.sh
[containers]
default_ulimits = ["nofile=$hard_nofile:$hard_nofile", "nproc=$hard_nproc:$hard_nproc"]

[engine]
runtime = "runc"
EOF
)
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$want" ]; then
  $SUDO mkdir -p "$CONF_DIR"
  printf '%s\n' "$want" | $SUDO tee "$CONF" >/dev/null
  say "wrote $CONF (runtime runc, ulimits nofile=$hard_nofile nproc=$hard_nproc)"
  restart=1
else
  restart=0
fi
want_reg=$(cat <<EOF
# written by ksched hack/install-podman.sh: the push tests' registry serves plain HTTP on loopback
[[registry]]
location = "127.0.0.1:$REG_PORT"
insecure = true
EOF
)
if [ ! -f "$REG_CONF" ] || [ "$(cat "$REG_CONF")" != "$want_reg" ]; then
  $SUDO mkdir -p "$(dirname "$REG_CONF")"
  printf '%s\n' "$want_reg" | $SUDO tee "$REG_CONF" >/dev/null
  say "wrote $REG_CONF (plain HTTP to the test registry 127.0.0.1:$REG_PORT)"
  restart=1  # the service reads registries.conf once
fi

# ------------------------------------------------------------------------------------------- 3. API service
answers() { $SUDO podman --url "unix://$SOCK" version >/dev/null 2>&1; }
PIDFILE=$SOCK_DIR/service.pid
# conmon starts in the service's working directory: a service started from a checkout that was deleted since
# ("Failed to get working directory", containers fail with "write child: broken pipe") must be restarted
if [ -f "$PIDFILE" ] && $SUDO readlink "/proc/$(cat "$PIDFILE")/cwd" 2>/dev/null | grep -q ' (deleted)$'; then
  say "the podman service's working directory was deleted"
  restart=1
fi
if [ "$restart" = 1 ] && [ -f "$PIDFILE" ] && $SUDO kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  say "restarting the podman service to apply the new settings"
  $SUDO kill "$(cat "$PIDFILE")"
  for _ in $(seq 50); do answers || break; sleep 0.1; done
fi
if answers; then
  say "podman service already answers on $SOCK"
else
  $SUDO mkdir -p "$SOCK_DIR"
  $SUDO rm -f "$SOCK"
  # setsid + nohup: the service outlives this script and the make process that ran it
  # from /: the service (and every conmon it starts) must not keep a checkout's folder as its working directory
  (
    cd / || exit 1
    $SUDO setsid nohup podman system service --time=0 "unix://$SOCK" >"$SOCK_DIR/service.log" 2>&1 </dev/null &
    echo $! | $SUDO tee "$PIDFILE" >/dev/null
  )
  for _ in $(seq 100); do answers && break; sleep 0.1; done
  if ! answers; then
    say "podman service did not come up on $SOCK; its log:" >&2
    tail -n 20 "$SOCK_DIR/service.log" >&2 || true
    exit 1
  fi
  say "started podman system service on $SOCK (log: $SOCK_DIR/service.log)"
fi
runtime=$($SUDO podman info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null || echo '?')
if [ "$runtime" != runc ]; then
  say "podman uses runtime '$runtime', not runc: $CONF was not read" >&2
  exit 1
fi

# -------------------------------------------------------------------------------------------- 4. base image
if $SUDO podman image exists "$BASE_IMAGE"; then
  say "base image $BASE_IMAGE already present"
else
  mirror=${KSCHED_APT_MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null \
    || true)}
  mirror=${mirror:-http://deb.debian.org/debian}
  say "building $BASE_IMAGE from $SUITE at $mirror (python3 + python3-venv, about a minute)"
  start=$(date +%s)
  if command -v mmdebstrap >/dev/null 2>&1; then
    # streamed: the root filesystem goes straight from the bootstrapper into podman as a tar
    $SUDO mmdebstrap --quiet --variant=apt --include=python3,python3-venv \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      "$SUITE" - "$mirror" | $SUDO podman import --quiet - "$BASE_IMAGE" >/dev/null
  else
    tmp=$($SUDO mktemp -d)
    trap '$SUDO rm -rf "$tmp"' EXIT
    $SUDO debootstrap --variant=minbase --include=python3,python3-venv "$SUITE" "$tmp/rootfs" "$mirror" \
      >"$tmp/debootstrap.log"
    $SUDO rm -rf "$tmp"/rootfs/var/cache/apt/archives/*.deb "$tmp"/rootfs/var/lib/apt/lists/*_*
    $SUDO tar -C "$tmp/rootfs" --numeric-owner -c . | $SUDO podman import --quiet - "$BASE_IMAGE" >/dev/null
  fi
  size=$($SUDO podman image inspect "$BASE_IMAGE" --format '{{.Size}}')
  say "built $BASE_IMAGE in $(( $(date +%s) - start )) s ($(( size / 1000000 )) MB)"
fi

say "ready; use it with:"
echo "export DOCKER_HOST=unix://$SOCK"
