// HTTPS for the model server: the [serving] keys tls_certificate,
// tls_private_key and tls_ca (docs/serving.md, "HTTPS").
//
// They are read from Config::values rather than kept in ServingConfig:
// serving_config.h is included, through config.h, by most of the tree, and
// only the model server reads these three.
#ifndef WEFT_CORE_CONFIG_SERVING_TLS_H_
#define WEFT_CORE_CONFIG_SERVING_TLS_H_

#include <string>

#include "core/config/config.h"

namespace weft::config {

struct ServingTls {
  std::string certificate;  // PEM; empty: plain HTTP
  std::string private_key;  // PEM
  std::string ca;           // PEM; empty: clients need no certificate
};

// The three paths, each resolved against the directory of the config file
// (Config::source) when relative; empty when not set.
ServingTls ServingTlsOf(const Config& config);

}  // namespace weft::config

#endif  // WEFT_CORE_CONFIG_SERVING_TLS_H_
