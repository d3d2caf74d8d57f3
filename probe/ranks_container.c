/* ranks_container.c - a trial step in the user's container (pyxis, issue 42): the user's
 * container options, which the probe step carried past itself, given back to the trial's
 * srun, and what the trial's task needs inside mounted beside the user's own mounts.
 */
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "argv.h"
#include "error.h"
#include "protocol.h"
#include "ranks.h"

/* The container's /tmp is its own (enroot mounts a tmpfs there): what the task needs is
 * mounted under it, where nothing of the image's is shadowed. */
#define INSIDE "/tmp/.autobatch"

/* The entry's value when it is a carried entry of that route ("NAME=value" past the route),
 * else NULL. */
static const char *carried(const char *entry, const char *route)
{
	size_t n = strlen(AB_ENV_CARRIED), r = strlen(route);

	if (strncmp(entry, AB_ENV_CARRIED, n) || strncmp(entry + n, route, r))
		return NULL;
	return entry + n + r;
}

/* Whether "NAME=..." is name. */
static bool named(const char *nv, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(nv, name, n) && nv[n] == '=';
}

/* A path pyxis' mount list can hold: absolute, without its separators. */
static bool mountable(const char *path)
{
	return path[0] == '/' && !strpbrk(path, ",:\n");
}

static int add_mount(struct ranks_container *c, const char *src, const char *dst,
		     const char *flags, char *err, size_t errlen)
{
	int n;

	if (!mountable(src) || !mountable(dst))
		return ab_fail(err, errlen, EINVAL, "%s cannot be mounted in the container: pyxis "
				       "mounts take absolute paths without ',' or ':'", src);
	n = snprintf(c->mounts + c->len, sizeof(c->mounts) - c->len, "%s%s:%s%s%s",
		     c->len ? "," : "", src, dst, flags ? ":" : "", flags ? flags : "");
	if (n < 0 || (size_t)n >= sizeof(c->mounts) - c->len)
		return ab_fail(err, errlen, E2BIG, "the container's mount list is too long");
	c->len += (size_t)n;
	return 0;
}

struct self_files {
	struct ranks_container *c;
	char *err;
	size_t errlen;
	int rc;
};

/* One loaded object, by the path the loader found it at: its name there is the one the
 * program asks for (libjson-c.so.5, not the file libjson-c.so.5.2.0 it links to). */
static int add_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct self_files *f = arg;
	const char *base = ab_base_name(info->dlpi_name);
	char dst[PATH_MAX];

	(void)size;
	if (f->rc < 0 || info->dlpi_name[0] != '/') /* the program itself (""), the vDSO */
		return 0;
	if (!strncmp(base, "ld-linux", 8) || !strncmp(base, "ld64", 4))
		snprintf(f->c->loader, sizeof(f->c->loader), "%s", base);
	snprintf(dst, sizeof(dst), "%s/%s", INSIDE, base);
	f->rc = add_mount(f->c, info->dlpi_name, dst, "ro", f->err, f->errlen);
	return 0;
}

/* This program, its loader and its libraries as the loader found them (the same files on
 * every node the probe is installed on), mounted read-only under INSIDE: the task runs there
 * through the host's loader, whatever C library the image has. */
static int add_self(struct ranks_container *c, char *err, size_t errlen)
{
	struct self_files f = {c, err, errlen, 0};
	char *self = realpath("/proc/self/exe", NULL), dst[PATH_MAX];

	if (!self)
		return ab_fail(err, errlen, errno, "cannot find this program: %s", strerror(errno));
	snprintf(c->self, sizeof(c->self), "%s", ab_base_name(self));
	snprintf(dst, sizeof(dst), "%s/%s", INSIDE, c->self);
	f.rc = add_mount(c, self, dst, "ro", err, errlen);
	free(self);
	dl_iterate_phdr(add_object, &f);
	if (f.rc == 0 && !c->loader[0])
		f.rc = ab_fail(err, errlen, ENOENT, "cannot find this program's loader");
	return f.rc;
}

/* The step hook (first on PYTHONPATH, where the probe put it) and the trial's config copy,
 * at their own paths: the trial's command names them so. */
static int add_trial_files(struct ranks_container *c, char *err, size_t errlen)
{
	const char *pp = getenv("PYTHONPATH"), *config = getenv(AB_ENV_CONFIG);
	char dir[PATH_MAX], probe[PATH_MAX + 32];
	int rc = 0;

	if (pp && pp[0] == '/') {
		snprintf(dir, sizeof(dir), "%.*s", (int)strcspn(pp, ":"), pp);
		snprintf(probe, sizeof(probe), "%s/autobatch/_hook.py", dir);
		if (access(probe, R_OK) == 0)
			rc = add_mount(c, dir, dir, "ro", err, errlen);
	}
	if (rc == 0 && config && config[0] == '/') {
		snprintf(dir, sizeof(dir), "%s", config);
		*strrchr(dir, '/') = '\0';
		if (dir[0])
			rc = add_mount(c, dir, dir, NULL, err, errlen);
	}
	return rc;
}

/* The user's option NAME=VALUE (srun's spelling: '_' for '-') as srun's argument. */
static void add_option(struct ab_argv *a, const char *nv)
{
	size_t n = strcspn(nv, "=");
	char name[64];

	if (n >= sizeof(name))
		return;
	for (size_t i = 0; i < n; i++)
		name[i] = nv[i] == '_' ? '-' : nv[i];
	name[n] = '\0';
	if (nv[n] && nv[n + 1])
		ab_argv_addf(a, "--%s=%s", name, nv + n + 1);
	else
		ab_argv_addf(a, "--%s", name);
}

int ranks_container_args(struct ab_argv *a, struct ranks_container *c, char *err,
			 size_t errlen)
{
	extern char **environ;
	const char *mounts = NULL, *env = NULL, *v;
	bool image = false, name = false;
	int rc;

	memset(c, 0, sizeof(*c));
	for (char **e = environ; *e; e++) {
		if ((v = carried(*e, AB_PYXIS_OPTION)))
			image |= named(v, "container_image"), name |= named(v, "container_name");
		else if ((v = carried(*e, AB_PYXIS_ENV)))
			image |= named(v, "IMAGE"), name |= named(v, "NAME");
	}
	if (!(c->on = image || name))
		return 0;
	for (char **e = environ; *e; e++) {
		if ((v = carried(*e, AB_PYXIS_ENV)))
			mounts = named(v, "MOUNTS") && !mounts ? strchr(v, '=') + 1 : mounts,
			env = named(v, "ENV") && !env ? strchr(v, '=') + 1 : env;
		if (!(v = carried(*e, AB_PYXIS_OPTION)))
			continue;
		if (named(v, "container_mounts"))
			mounts = strchr(v, '=') + 1;
		else if (named(v, "container_env"))
			env = strchr(v, '=') + 1;
		/* the user's save is of the user's step; the user's name too, where an image is
		 * given: each trial imports it afresh, and pyxis removes that container after */
		else if (!named(v, "container_save") && !(image && named(v, "container_name")))
			add_option(a, v);
	}
	if (mounts && *mounts) {
		if (strlen(mounts) >= sizeof(c->mounts) / 2)
			return ab_fail(err, errlen, E2BIG, "the container's mount list is too long");
		c->len = (size_t)snprintf(c->mounts, sizeof(c->mounts), "%s", mounts);
	}
	if ((rc = add_self(c, err, errlen)) < 0 || (rc = add_trial_files(c, err, errlen)) < 0)
		return rc;
	ab_argv_addf(a, "--container-mounts=%s", c->mounts);
	if (image) /* imported by the first trial, reused by the others, removed after them */
		ab_argv_addf(a, "--container-name=" AB_TRIAL_CONTAINER, ranks_env_id("SLURM_JOB_ID"),
			     ranks_env_id(AB_GUARD_ENV));
	/* the image's own variables win over the job's, except these */
	ab_argv_addf(a, "--container-env=PYTHONPATH,TMPDIR%s%s", env && *env ? "," : "",
		     env ? env : "");
	return 1;
}

void ranks_container_command(struct ab_argv *a, const struct ranks_container *c)
{
	ab_argv_addf(a, "%s/%s", INSIDE, c->loader);
	ab_argv_add(a, "--library-path");
	ab_argv_add(a, INSIDE);
	ab_argv_addf(a, "%s/%s", INSIDE, c->self);
}

void ranks_container_environ(const struct ranks_container *c)
{
	extern char **environ;
	size_t k = 0;
	char *restore[32];
	size_t nrestore = 0;
	const char *v;

	for (size_t i = 0; environ[i]; i++) {
		v = carried(environ[i], AB_PYXIS_ENV);
		/* pyxis' own variables, where they say what a trial's container is: back */
		if (v && c->on && !named(v, "NAME") && !named(v, "SAVE") && !named(v, "MOUNTS") &&
		    !named(v, "ENV") && nrestore < sizeof(restore) / sizeof(restore[0]))
			restore[nrestore++] = environ[i] + strlen(AB_ENV_CARRIED);
		if (strncmp(environ[i], AB_ENV_CARRIED, strlen(AB_ENV_CARRIED)))
			environ[k++] = environ[i];
	}
	environ[k] = NULL;
	for (size_t i = 0; i < nrestore; i++)
		putenv(restore[i]);
	if (c->on) /* the container's /tmp, not a host directory it does not have */
		setenv("TMPDIR", "/tmp", 1);
}
