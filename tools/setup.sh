#!/usr/bin/env bash
# Installs the Debian packages Weft needs (only those missing), then
# configures and builds it with CMake and Ninja.
#
#   tools/setup.sh                  release build in build/
#   tools/setup.sh --preset asan    another preset (debug, asan, tsan, lite, lite-arm64)
#   tools/setup.sh --packages-only  install packages, do not build
#   tools/setup.sh --with-hip       also install hipcc and libamdhip64-dev
#                                   (the hip plugin; or WEFT_SETUP_HIP=1)
#
# Works as root, or as a user with sudo. Set WEFT_WERROR=ON to turn
# warnings into errors (CI does). CUDA is never installed: the cuda plugin
# is built when nvcc is found (PATH or /usr/local/cuda).
set -euo pipefail

cd "$(dirname "$0")/.."
preset=release
build=1
with_hip=${WEFT_SETUP_HIP:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=${2:?--preset needs a name}; shift 2 ;;
    --preset=*) preset=${1#--preset=}; shift ;;
    --packages-only) build=0; shift ;;
    --with-hip) with_hip=1; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done

# What the build, the tests and the tools need, by Debian package name.
packages=(
  build-essential cmake ninja-build git pkg-config binutils
  ccache                   # repeated builds on one machine (CI's presets share it)
  clang libclang-rt-14-dev  # libFuzzer targets (the fuzz preset) and a second compiler
  clang-format             # tools/format.sh: the house format, checked by CI
  libomp-14-dev            # OpenMP for clang: the CPU plugin in the fuzz preset (op_fuzzer)
  libboost-dev             # Boost.DLL (plugin loading), Boost.Asio (the tcp transport)
  libzmq3-dev cppzmq-dev   # the zmq transport
  libssl-dev openssl       # OpenSSL: the cluster handshake (HMAC-SHA256), TLS on tcp links; the tests' certificates
  libibverbs-dev           # the rdma transport (builds here; UNAVAILABLE without a device)
  libgloo-dev              # the gloo collectives plugin: training.mode = "allreduce"
  iproute2                 # cluster tests in network namespaces (ip netns, veth)
  openmpi-bin              # mpirun: the test of a cluster launched by Open MPI
  libtomlplusplus-dev      # TOML configuration
  nlohmann-json3-dev       # every JSON Weft writes (core/base/json.h)
  libsimdjson-dev          # the model server reads request bodies with it (core/serving)
  libcli11-dev             # the weft command line
  libgtest-dev libgmock-dev
  capnproto libcapnp-dev   # graph files (.wg/.wgt)
  libdnnl-dev              # oneDNN: the CPU plugin's matmul, convolution, ...
  libxnnpack-dev libpthreadpool-dev  # XNNPACK: the lite build's convolutions and products (docs/lite.md)
  libopenblas-dev          # the matmul benchmark's peer
  python3-numpy            # independent reference values in the tests
  python3-dev pybind11-dev python3-pytest  # the Python package weft (python/, docs/python.md) and its tests
  python3-matplotlib       # tools/bench/scale_model.py: the scaling plot in docs/distributed-internals.md
  zlib1g-dev               # reading .gz datasets (IDX files)
  libonnx-dev libprotobuf-dev protobuf-compiler  # ONNX import and export (core/onnx, docs/onnx.md)
  python3-onnx             # the ONNX tests: reading what Weft exports, building bad models
  libonnx-testdata         # ONNX's backend node tests (tests/onnx/node_tests.cc)
  python3-torch python3-torchvision  # tools/onnx/export_models.py: PyTorch models as ONNX, the benchmarks' peer
  dataset-fashion-mnist    # the training demo's data (/usr/share/datasets/fashion-mnist)
  # The OpenCL device plugin: headers and the ICD loader to build it, PoCL
  # as a real OpenCL device on machines without a GPU (its tests and the
  # conformance suite run on it), clinfo to see what the loader finds.
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
)

# The lite build cross-compiled for aarch64 (docs/lite.md): Debian's cross
# toolchain and qemu-user to run what it builds; its arm64 libraries are
# unpacked into build-sysroot-arm64/ below (tools/arm64_sysroot.sh).
if [ "$preset" = lite-arm64 ]; then
  packages+=(g++-aarch64-linux-gnu qemu-user)
fi

# ROCm's HIP compiler and runtime (Debian packages), only on request:
# they are large and useful only with an AMD GPU.
if [ "$with_hip" = 1 ]; then
  packages+=(hipcc libamdhip64-dev)
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then
      sudo=(sudo)
    else
      echo "setup.sh: these packages are missing and you are not root (and there is no sudo):" >&2
      echo "  ${missing[*]}" >&2
      echo "Install them as root:  apt-get install ${missing[*]}" >&2
      exit 1
    fi
  fi
  echo "==> Installing ${#missing[@]} missing package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "==> All ${#packages[@]} required packages are installed"
fi

if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "==> CUDA found: the cuda plugin will be built"
else
  echo "==> CUDA not found: the cuda plugin is skipped (install the CUDA toolkit yourself to build it)"
fi

[ "$preset" != lite-arm64 ] || tools/arm64_sysroot.sh

[ "$build" -eq 1 ] || exit 0

echo "==> Configuring (preset $preset)"
cmake --preset "$preset" >/dev/null
echo "==> Building (preset $preset)"
cmake --build --preset "$preset"
dir=build
[ "$preset" = release ] || dir=build-$preset
if [[ "$preset" == lite* ]]; then
  echo "==> Built $dir/bin/weft-lite and $dir/lib/libweft_lite.a (docs/lite.md)"
else
  echo "==> Built $dir/bin/weft, with plugins in $dir/lib/weft/plugins/"
fi
