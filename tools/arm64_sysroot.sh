#!/usr/bin/env bash
# The arm64 libraries the lite-arm64 preset links (docs/lite.md), unpacked
# into build-sysroot-arm64/ from Debian's arm64 packages: Cap'n Proto's
# static archives, XNNPACK, pthreadpool and cpuinfo. They are downloaded
# and unpacked, not installed: XNNPACK's and pthreadpool's packages are not
# Multi-Arch: same, so installing their arm64 versions would remove the
# amd64 ones, and PyTorch with them. The C and C++ runtimes come with the
# cross toolchain (g++-aarch64-linux-gnu, in /usr/aarch64-linux-gnu).
# Run by tools/setup.sh --preset lite-arm64; does nothing when the sysroot
# already holds these packages.
set -euo pipefail
cd "$(dirname "$0")/.."
sysroot=build-sysroot-arm64
# Cap'n Proto's CMake package asks for OpenSSL and zlib (its kj-tls and kj-gzip).
packages=(libcapnp-dev libxnnpack-dev libxnnpack0 libpthreadpool-dev libpthreadpool0 libcpuinfo0 libssl-dev libssl3 zlib1g-dev zlib1g)
want="${packages[*]}"
if [ -f "$sysroot/.packages" ] && [ "$(cat "$sysroot/.packages")" = "$want" ]; then
  echo "==> The arm64 sysroot is up to date ($sysroot)"
  exit 0
fi
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "==> Adding the arm64 architecture to dpkg (for apt-get download)"
  "${sudo[@]}" dpkg --add-architecture arm64
  "${sudo[@]}" apt-get update -q
fi
downloads=$(mktemp -d)
trap 'rm -rf "$downloads"' EXIT
echo "==> Downloading ${packages[*]} for arm64"
if ! (cd "$downloads" && apt-get download -q "${packages[@]/%/:arm64}" >/dev/null 2>&1); then
  "${sudo[@]}" apt-get update -q
  (cd "$downloads" && apt-get download -q "${packages[@]/%/:arm64}" >/dev/null)
fi
rm -rf "$sysroot"
mkdir -p "$sysroot"
for deb in "$downloads"/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
echo "$want" >"$sysroot/.packages"
echo "==> Unpacked the arm64 sysroot into $sysroot"
