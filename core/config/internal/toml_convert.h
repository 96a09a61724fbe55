// Not API: conversion from toml++ nodes to config::Value. Only files of
// core/config include this (and with it toml++).
#ifndef WEFT_CORE_CONFIG_INTERNAL_TOML_CONVERT_H_
#define WEFT_CORE_CONFIG_INTERNAL_TOML_CONVERT_H_

#include <toml++/toml.h>

#include <string_view>

#include "core/base/status.h"
#include "core/config/value.h"

namespace weft::config::internal {

SourcePos PosOf(const toml::source_region& region, std::string_view file);

// Converts |node| (and, for arrays, its elements; tables are kept as a
// marker with no contents).
Value ConvertNode(const toml::node& node, std::string_view file, const SourcePos& key_pos);

// Parses |text|; a syntax error becomes "<file>:<line>:<col>: <description>".
Expected<toml::table> ParseDocument(std::string_view text, std::string_view file);

}  // namespace weft::config::internal

#endif  // WEFT_CORE_CONFIG_INTERNAL_TOML_CONVERT_H_
