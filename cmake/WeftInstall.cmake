# cmake --install puts into the prefix:
#   bin/weft                     the CLI
#   lib/libweft.so               the core
#   lib/weft/plugins/*.so        the plugins built here
#   include/weft/                the SDK headers (C ABI + C++ helpers)
#   lib/cmake/Weft/              WeftConfig.cmake, so that
#                                find_package(Weft) + weft_add_plugin()
#                                build a plugin out of tree
include(CMakePackageConfigHelpers)
set(_weft_cmake_dir "lib/cmake/Weft")

install(EXPORT WeftTargets NAMESPACE Weft:: DESTINATION "${_weft_cmake_dir}")
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/WeftConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake/WeftConfig.cmake"
  INSTALL_DESTINATION "${_weft_cmake_dir}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake/WeftConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/cmake/WeftConfig.cmake"
  "${PROJECT_BINARY_DIR}/cmake/WeftConfigVersion.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/WeftPlugin.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/weft_plugin.map"
  DESTINATION "${_weft_cmake_dir}")
