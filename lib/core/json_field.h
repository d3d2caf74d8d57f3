/* json_field.h - one field of a JSON object (json-c), read as the type it must have: what the
 * cache's marks, the report's real run and the job's comment read; absent or mistyped, a default.
 */
#ifndef AUTOBATCH_JSON_FIELD_H
#define AUTOBATCH_JSON_FIELD_H

#include <json-c/json.h>
#include <stdint.h>

/* o's integer key, or none when o is NULL or key is absent or not an integer. */
int64_t ab_json_int(struct json_object *o, const char *key, int64_t none);

/* o's string key, or "" when o is NULL or key is absent or not a string. */
const char *ab_json_text(struct json_object *o, const char *key);

#endif
