/* json_field.c - see json_field.h. */
#include "json_field.h"

int64_t ab_json_int(struct json_object *o, const char *key, int64_t none)
{
	struct json_object *v;

	return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int)
		       ? json_object_get_int64(v)
		       : none;
}

const char *ab_json_text(struct json_object *o, const char *key)
{
	struct json_object *v;

	return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : "";
}
