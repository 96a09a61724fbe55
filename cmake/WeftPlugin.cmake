# weft_add_plugin(NAME <name> KIND device|transport|optimizer|collectives
#                 SRCS <file>... [DEPS <target>...]
#                 [OUTPUT_DIRECTORY <dir>] [NO_INSTALL])
#
# Builds a Weft plugin as a MODULE named weft_<kind>_<name>.so that sees the
# SDK (Weft::sdk) and its own DEPS, nothing else. The module exports only
# its entry symbol (weft_plugin_init_v<major>) and is built with hidden
# visibility. Linking libweft from a plugin is refused: plugins talk to the
# host through the host table alone, so they keep working across host
# versions.
#
# This file is used in-tree and installed next to WeftConfig.cmake, so a
# third party builds its plugin with exactly the same rules:
#
#   find_package(Weft 0.1 REQUIRED)
#   weft_add_plugin(NAME mydev KIND device SRCS mydev.cc)
include_guard(GLOBAL)

set(_WEFT_PLUGIN_MAP "${CMAKE_CURRENT_LIST_DIR}/weft_plugin.map")

function(weft_add_plugin)
  cmake_parse_arguments(ARG "NO_INSTALL" "NAME;KIND;OUTPUT_DIRECTORY"
                        "SRCS;DEPS" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_NAME MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "weft_add_plugin: NAME must be lower_snake_case, got '${ARG_NAME}'")
  endif()
  if(NOT ARG_KIND MATCHES "^(device|transport|optimizer|collectives)$")
    message(FATAL_ERROR "weft_add_plugin(${ARG_NAME}): KIND must be device, transport, optimizer or collectives, "
                        "got '${ARG_KIND}'")
  endif()
  if(NOT ARG_SRCS)
    message(FATAL_ERROR "weft_add_plugin(${ARG_NAME}): SRCS is empty")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "weft_add_plugin(${ARG_NAME}): unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  foreach(dep IN LISTS ARG_DEPS)
    if(dep MATCHES "^(weft|Weft::weft|weft_core.*|weft::core.*)$")
      message(FATAL_ERROR "weft_add_plugin(${ARG_NAME}): a plugin must not link '${dep}'; "
                          "plugins see the SDK (Weft::sdk) only")
    endif()
  endforeach()

  set(target weft_${ARG_KIND}_${ARG_NAME})
  add_library(${target} MODULE ${ARG_SRCS})
  # Every plugin, for the weft_plugins target (plugins/CMakeLists.txt).
  set_property(GLOBAL APPEND PROPERTY WEFT_PLUGIN_TARGETS ${target})
  target_link_libraries(${target} PRIVATE Weft::sdk ${ARG_DEPS})
  if(TARGET weft_warnings)
    target_link_libraries(${target} PRIVATE weft_warnings)
  endif()

  if(ARG_OUTPUT_DIRECTORY)
    set(out_dir "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED WEFT_PLUGIN_OUTPUT_DIRECTORY)
    set(out_dir "${WEFT_PLUGIN_OUTPUT_DIRECTORY}")
  else()
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${target}
    LIBRARY_OUTPUT_DIRECTORY "${out_dir}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    WEFT_PLUGIN_KIND ${ARG_KIND}
    WEFT_PLUGIN_NAME ${ARG_NAME})
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${_WEFT_PLUGIN_MAP}"
    "LINKER:--exclude-libs,ALL")
  # A plugin must resolve every symbol itself or through its DEPS; nothing
  # may come from the host process. Sanitizer runtimes live in the
  # executable, so the check is skipped in sanitizer builds.
  if(NOT WEFT_SANITIZE)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${_WEFT_PLUGIN_MAP}")

  if(NOT ARG_NO_INSTALL)
    if(NOT DEFINED WEFT_PLUGIN_INSTALL_DIR)
      set(WEFT_PLUGIN_INSTALL_DIR "lib/weft/plugins")
    endif()
    install(TARGETS ${target} LIBRARY DESTINATION "${WEFT_PLUGIN_INSTALL_DIR}")
  endif()
  set_property(GLOBAL APPEND PROPERTY WEFT_PLUGIN_TARGETS ${target})
endfunction()
