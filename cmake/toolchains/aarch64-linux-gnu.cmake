# Cross-compiling for 64-bit ARM Linux (the lite-arm64 preset, docs/lite.md)
# with Debian's cross toolchain (g++-aarch64-linux-gnu, whose C and C++
# runtimes live in /usr/aarch64-linux-gnu) and the arm64 libraries
# tools/arm64_sysroot.sh unpacks into build-sysroot-arm64/. Libraries and
# CMake packages come from that sysroot, headers from it or from the host
# (header-only libraries are the same on both), programs from the host.
# Programs built for the target (weft-lite-ops at build time, the tests)
# run under qemu-user. tools/setup.sh --preset lite-arm64 installs it all.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

get_filename_component(WEFT_ARM64_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../../build-sysroot-arm64" ABSOLUTE)
if(NOT EXISTS "${WEFT_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/libXNNPACK.so.0")
  message(FATAL_ERROR "no arm64 sysroot in ${WEFT_ARM64_SYSROOT}: run tools/setup.sh --preset lite-arm64 "
                      "(or tools/arm64_sysroot.sh) first")
endif()
set(_lib "${WEFT_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu")
set(CMAKE_FIND_ROOT_PATH "${WEFT_ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# XNNPACK's own dependencies (cpuinfo, pthreadpool) are found at link time
# in the sysroot. At run time the cross toolchain's C and C++ runtimes come
# first: a machine with arm64 packages installed through multiarch has
# another glibc in /lib/aarch64-linux-gnu, which the toolchain's loader
# must not pick up.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_lib}")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu;-E;LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib:${_lib})
