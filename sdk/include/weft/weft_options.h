/* Weft plugin ABI: configuration options a plugin declares.
 *
 * A plugin declares the keys it accepts in its TOML section
 * ([devices.<type>], [transports.<scheme>], [optimizers.<name>]) as an
 * array of weft_option_def_t. The host validates the user's file against
 * the declaration, so a typo or a wrong type is reported as
 * `cluster.toml:12:9: devices.cpu.count: expected an integer >= 1, got 0`
 * before the plugin sees anything, and `weft config check` can check
 * plugin sections too. The plugin then reads the validated values through
 * the host's option getters (weft_host_t.option_get_*), which also return
 * the declared default for a key the user did not set.
 *
 *   static const weft_option_def_t kOptions[] = {
 *     {sizeof(weft_option_def_t), "count", WEFT_OPTION_INT, "1",
 *      "Logical devices to expose.", 1, 1, 1, 64, NULL, 0},
 *   };
 */
#ifndef WEFT_OPTIONS_H_
#define WEFT_OPTIONS_H_

#include "weft/weft_abi.h"

WEFT_EXTERN_C_BEGIN

typedef int32_t weft_option_type_t;

enum {
  WEFT_OPTION_BOOL = 1,
  WEFT_OPTION_INT = 2,   /* int64_t */
  WEFT_OPTION_FLOAT = 3, /* double; an integer literal is accepted too */
  WEFT_OPTION_STRING = 4
};

typedef struct weft_option_def_t {
  size_t struct_size;
  /* The key inside the plugin's section, lower_snake_case. Required. */
  const char* key;
  weft_option_type_t type;
  /* The default as a TOML value ("1", "0.9", "true", "\"auto\""), or NULL
   * when the key has no default (getters then return NOT_FOUND if the user
   * did not set it). */
  const char* default_value;
  /* One sentence for people; `weft plugins --options` prints it. Optional:
   * NULL shows nothing. */
  const char* doc;
  /* For INT and FLOAT: whether |min_value| and |max_value| bound the
   * value (inclusive). */
  weft_bool_t has_min;
  double min_value;
  weft_bool_t has_max;
  double max_value;
  /* For STRING: the accepted values, or NULL (any string) when
   * num_choices is 0. */
  const char* const* choices;
  size_t num_choices;
} weft_option_def_t;

#define WEFT_OPTION_DEF_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_option_def_t, num_choices)

WEFT_EXTERN_C_END

#endif /* WEFT_OPTIONS_H_ */
