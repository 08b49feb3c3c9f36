#!/usr/bin/env bash
# Install the system packages the test suite needs beyond the Python venv. Idempotent: it does nothing
# when everything is already on PATH, so `make test` can call it every time.
#
#   prometheus, promtool  - tests/integration/test_network_traffic_prometheus.py runs a real Prometheus
#                           (Debian/Ubuntu package "prometheus" ships both binaries)
#   chromium              - tests/e2e/test_report_chromium.py opens `ksched simulate --report` output in
#                           headless Chromium (Debian package "chromium"; Ubuntu's is a snap, "chromium-browser")
set -euo pipefail

have_chromium() {
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
    command -v google-chrome >/dev/null 2>&1
}

need=()
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || need+=(prometheus)
have_chromium || need+=(chromium)

if [ ${#need[@]} -eq 0 ]; then
  echo "install-test-deps: prometheus, promtool and chromium already installed ($(command -v prometheus))"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: apt-get not found; install ${need[*]} with your package manager" >&2
  echo "  (or download Prometheus from https://prometheus.io/download/ and put prometheus and promtool on PATH," >&2
  echo "  and put a Chromium or Chrome on PATH)" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-test-deps: need root (or sudo) to apt-get install ${need[*]}" >&2
    exit 1
  fi
fi

echo "install-test-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
# Only the binaries are needed: skip recommended extras (node-exporter ...).
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"

# The package enables a system-wide Prometheus service on :9090. The tests start their own server on a
# free loopback port, so stop and disable the one this script just installed (only where systemd runs).
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  if $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1; then
    echo "install-test-deps: disabled the prometheus.service the package enabled (tests run their own)"
  fi
fi

command -v prometheus >/dev/null && command -v promtool >/dev/null || {
  echo "install-test-deps: prometheus/promtool still missing after install" >&2
  exit 1
}
have_chromium || {
  echo "install-test-deps: chromium still missing after install" >&2
  exit 1
}
echo "install-test-deps: $(prometheus --version 2>&1 | head -n1)"
