/* A plugin built for a future ABI major version: it exports only
 * weft_plugin_init_v2. The host must refuse it and name both versions. */
#include <stddef.h>

#include "weft/weft_abi.h"

WEFT_PLUGIN_EXPORT int weft_plugin_init_v2(const void* host, const void** out_plugin);

int weft_plugin_init_v2(const void* host, const void** out_plugin) {
  (void)host;
  *out_plugin = NULL;
  return 0;
}
