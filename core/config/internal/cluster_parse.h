// Not API: reading the [cluster] table from toml++ (config.cc calls it).
#ifndef WEFT_CORE_CONFIG_INTERNAL_CLUSTER_PARSE_H_
#define WEFT_CORE_CONFIG_INTERNAL_CLUSTER_PARSE_H_

#include <toml++/toml.h>

#include <string_view>
#include <vector>

#include "core/config/cluster_config.h"
#include "core/config/options.h"
#include "core/config/value.h"

namespace weft::config::internal {

// Checks the [cluster] table |node| (|key_pos|: where "cluster" is
// written), appending every problem to |errors|. When it added none, the
// result is the typed section and |*values| its validated scalar keys.
ClusterConfig ParseClusterSection(const toml::node& node, std::string_view file, const SourcePos& key_pos,
                                  OptionValues* values, std::vector<ConfigError>& errors);

}  // namespace weft::config::internal

#endif  // WEFT_CORE_CONFIG_INTERNAL_CLUSTER_PARSE_H_
