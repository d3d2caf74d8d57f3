/* config_load.c - a config file's text checked (UTF-8, no NUL, a known format) and handed to
 * the YAML or JSON reader, which builds its tree.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_nodes.h"
#include "config_readers.h"
#include "error.h"

static size_t line_of(const char *buf, size_t offset)
{
	size_t line = 1;

	for (size_t i = 0; i < offset; i++)
		line += buf[i] == '\n';
	return line;
}

/* Length of a valid UTF-8 sequence at p, or 0 (overlong forms and surrogates refused). */
static size_t utf8_valid(const unsigned char *p, size_t left)
{
	size_t n = ab_utf8_len(p[0]);

	if (p[0] < 0x80)
		return 1;
	if (p[0] < 0xc2 || p[0] > 0xf4 || n > left)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
	    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
		return 0;
	return n;
}

static int check_text(const struct ab_config *cfg, char *err, size_t errlen)
{
	const unsigned char *b = (const unsigned char *)cfg->buf;
	size_t n;

	for (size_t i = 0; i < cfg->len; i += n) {
		if (b[i] == '\0')
			return ab_fail(err, errlen, EINVAL,
				       "%s looks like a binary file (a NUL byte on line %zu): give "
				       "the YAML or JSON config",
				       cfg->name, line_of(cfg->buf, i));
		if (!(n = utf8_valid(b + i, cfg->len - i)))
			return ab_fail(err, errlen, EILSEQ,
				       "%s is not UTF-8 (byte offset %zu, line %zu): convert it, e.g. "
				       "iconv -t UTF-8",
				       cfg->name, i, line_of(cfg->buf, i));
	}
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* By extension; otherwise JSON when json-c accepts the whole file, else YAML. */
static enum ab_format detect_format(const struct ab_config *cfg)
{
	if (ends_with(cfg->name, ".json"))
		return AB_FORMAT_JSON;
	if (ends_with(cfg->name, ".yaml") || ends_with(cfg->name, ".yml"))
		return AB_FORMAT_YAML;
	return ab_json_validate(cfg, NULL, 0) == 0 ? AB_FORMAT_JSON : AB_FORMAT_YAML;
}

int ab_config_parse(const char *name, const char *buf, size_t len, enum ab_format format,
		    struct ab_config **out, char *err, size_t errlen)
{
	struct ab_config *cfg = calloc(1, sizeof(*cfg));
	int rc = -ENOMEM;

	if (!cfg || !(cfg->name = strdup(name)) || !(cfg->buf = malloc(len + 1))) {
		ab_fail(err, errlen, ENOMEM, "%s: out of memory", name);
		goto fail;
	}
	memcpy(cfg->buf, buf, len);
	cfg->buf[len] = '\0';
	cfg->len = len;
	if (len > AB_CONFIG_MAX_BYTES) {
		rc = ab_fail(err, errlen, EFBIG, "%s is %zu bytes, more than the %u a config may "
						 "have: is it the right file?",
			     name, len, AB_CONFIG_MAX_BYTES);
		goto fail;
	}
	if ((rc = check_text(cfg, err, errlen)) < 0)
		goto fail;
	cfg->format = format == AB_FORMAT_AUTO ? detect_format(cfg) : format;
	rc = cfg->format == AB_FORMAT_JSON ? ab_json_read(cfg, err, errlen)
					   : ab_yaml_read(cfg, err, errlen);
	if (rc < 0)
		goto fail;
	*out = cfg;
	return 0;
fail:
	ab_config_free(cfg);
	return rc;
}
