# cmake --install puts into the prefix:
#   bin/weft                     the CLI
#   lib/libweft.so               the core
#   lib/weft/plugins/*.so        the plugins built here
#   include/weft/                the SDK headers (C ABI + C++ helpers)
#   lib/cmake/Weft/              WeftConfig.cmake, so that
#                                find_package(Weft) + weft_add_plugin()
#                                build a plugin out of tree
#   share/weft/sdk/examples/     two device plugins' sources to start from
#                                (example_device, add_device)
#   share/weft/sdk/docs/         the documentation (plugins.md first)
#   share/weft/conformance/      the conformance kit's cases and NumPy's
#                                values (tools/conformance)
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

# What a plugin author holding only the prefix needs besides the headers:
# the examples' sources (they build with the CMakeLists.txt beside them)
# and the docs.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/tests/sdk/example_device" "${PROJECT_SOURCE_DIR}/tests/sdk/add_device"
        DESTINATION "share/weft/sdk/examples")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/docs/" DESTINATION "share/weft/sdk/docs" FILES_MATCHING PATTERN "*.md")
