#!/usr/bin/env bash
# System packages cellfabric needs on Debian 12, installed only when missing (idempotent).
# Mininet comes from Debian; its Open vSwitch dependency is installed but never started:
# cellfabric's Mininet switches are its own node classes.
set -euo pipefail

PACKAGES=(
  mininet          # emulated hosts and links (Python package + mnexec)
  bridge-utils
  iputils-ping
  iproute2         # ip netns / ip link for namespaces and veth pairs
  procps           # sysctl
  ethtool          # offload settings on veths
  libpcap0.8       # tests/unit/test_netlab_capture.py reads ports with libpcap, as BMv2 does
  python3-venv     # venv for a stock Debian python3
  make
  chromium         # headless browser: tests/sim/test_sim_report_html.py opens report.html
  gcc              # p4sim's native data plane builds its generated C (absent: Python path)
  libc6-dev        # the C library's headers for it
  frr              # --routing bgp: zebra, bgpd, bfdd per switch namespace (our own instances)
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all system packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: error: missing Debian packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo apt-get install -y ${missing[*]})" >&2
  exit 1
fi

if ! command -v apt-get >/dev/null; then
  echo "install-deps: error: apt-get not found; install these packages by hand: ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -q --no-install-recommends "${missing[@]}"

# Debian's frr package enables its system-wide service; cellfabric runs its own instances per
# switch namespace (each with its own pid, vty and config folders), so the service stays off.
if [[ " ${missing[*]} " == *" frr "* ]] && [ -d /run/systemd/system ]; then
  systemctl disable --now frr.service >/dev/null 2>&1 || true
fi
