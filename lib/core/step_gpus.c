/* step_gpus.c - a step's GPU request as srun options for its trial steps. */
#include "step_gpus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static const char *const options[] = {"--gpus-per-task=", "--gres=", "--gpus=", "--gpu-bind=",
				      "--cpus-per-gpu="};

#define VALUE_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:,.-"

bool ab_step_option_ok(const char *opt)
{
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		size_t n = strlen(options[i]);

		if (!strncmp(opt, options[i], n))
			return opt[n] && strlen(opt) < AB_STEP_OPTION_LEN &&
			       strspn(opt + n, VALUE_CHARS) == strlen(opt + n);
	}
	return false;
}

/* One TRES entry without its "gres:" or "gres/" prefix ("gpu:a100:2"), or NULL for one that
 * is not a GRES ("cpu:4", "mem=2G"). */
static const char *gres_of(const char *entry)
{
	return !strncmp(entry, "gres:", 5) || !strncmp(entry, "gres/", 5) ? entry + 5 : NULL;
}

/* out's next option, options[which] and value, when srun may be handed it. */
static bool put(struct ab_step_gpus *out, int which, const char *value)
{
	if (snprintf(out->opt[out->n], AB_STEP_OPTION_LEN, "%s%s", options[which], value) >=
		    AB_STEP_OPTION_LEN ||
	    !ab_step_option_ok(out->opt[out->n]))
		return false;
	out->n++;
	return true;
}

/* Appends "--OPTION=VALUE" built from the entries of list (comma separated) that are GRES,
 * GPUs only unless any_gres: "gpu:a100:2" gives "a100:2" (gpu_value) or "gpu:a100:2". */
static int add(struct ab_step_gpus *out, int which, const char *list, bool any_gres,
	       bool gpu_value, char *err, size_t errlen)
{
	char copy[AB_STEP_OPTION_LEN], value[AB_STEP_OPTION_LEN] = "", *save = NULL;
	size_t len = 0;

	if (!list || !*list)
		return 0;
	if (strlen(list) >= sizeof(copy))
		return ab_fail(err, errlen, E2BIG, "the step's GPU request is too long (%s)", list);
	snprintf(copy, sizeof(copy), "%s", list);
	for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		const char *g;
		bool gpu;

		/* "gres/gpu=2" (a form of later releases) as "gres/gpu:2" */
		for (char *eq = strchr(e, '='); eq; eq = strchr(eq, '='))
			*eq = ':';
		g = gres_of(e);
		gpu = g && (!strncmp(g, "gpu:", 4) || !strcmp(g, "gpu"));

		if (!g || (!gpu && !any_gres))
			continue;
		ab_append(value, sizeof(value), &len, "%s%s", len ? "," : "",
			  gpu && gpu_value ? g + 3 + (g[3] == ':') : g);
	}
	if (!len || put(out, which, value))
		return 0;
	return ab_fail(err, errlen, EINVAL, "the step's GPU request %s is not one srun takes back "
					    "as %s",
		       list, options[which]);
}

int ab_step_gpus_from_tres(const char *per_task, const char *per_node, const char *per_step,
			   const char *bind, const char *cpus_per_tres, struct ab_step_gpus *out,
			   char *err, size_t errlen)
{
	/* "gpu:closest" (22.05), "gres/gpu:closest" (later), maybe "verbose,gpu:..." */
	const char *b = bind ? strstr(bind, "gpu:") : NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = add(out, 0, per_task, false, true, err, errlen)) < 0 ||
	    (rc = add(out, 1, per_node, true, false, err, errlen)) < 0 ||
	    (rc = add(out, 2, per_step, false, true, err, errlen)) < 0 ||
	    (rc = add(out, 4, cpus_per_tres, false, true, err, errlen)) < 0)
		return rc;
	if (!b || put(out, 3, b + 4))
		return 0;
	return ab_fail(err, errlen, EINVAL, "the step's GPU binding %s is not one srun takes back "
					    "as --gpu-bind",
		       bind);
}

/* "a100:2" or "2": the count, the last field; a GPU type alone is one. */
static unsigned count_of(const char *value)
{
	const char *c = strrchr(value, ':');
	long n = strtol(c ? c + 1 : value, NULL, 10);

	return n > 0 && n < 65536 ? (unsigned)n : 1;
}

unsigned ab_step_gpus_count(const struct ab_step_gpus *g, unsigned ntasks, unsigned nnodes)
{
	for (int i = 0; i < g->n; i++) {
		const char *o = g->opt[i], *v = strchr(o, '=');
		char gres[AB_STEP_OPTION_LEN], *save = NULL;

		if (!v)
			continue;
		if (!strncmp(o, "--gpus-per-task=", 16))
			return count_of(v + 1) * ntasks;
		if (!strncmp(o, "--gpus=", 7))
			return count_of(v + 1);
		if (strncmp(o, "--gres=", 7))
			continue;
		snprintf(gres, sizeof(gres), "%s", v + 1); /* per node: "gpu:big:2,nic:1" */
		for (char *e = strtok_r(gres, ",", &save); e; e = strtok_r(NULL, ",", &save))
			if (!strncmp(e, "gpu", 3) && (!e[3] || e[3] == ':'))
				return count_of(e) * (nnodes ? nnodes : 1);
	}
	return 0;
}
