#!/usr/bin/env bash
# Set-up (tools/setup.sh) plus the main job. For now that is showing what
# this machine offers Weft: the plugins found and the devices they open.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
echo
echo "==> build/bin/weft plugins"
build/bin/weft plugins
echo
echo "==> build/bin/weft devices"
build/bin/weft devices
