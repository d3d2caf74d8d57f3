/* trial_container.c - a trial's variables and mounts for a container named in its command.
 *
 * apptainer and singularity pass the host's environment in, except under --cleanenv, and
 * mount $HOME, /tmp and the working directory; the step hook's directory and a trial
 * directory elsewhere are not there. Their own variables carry both, so a trial of
 * `apptainer exec --cleanenv img.sif python train.py` needs nothing from its user.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "protocol.h"
#include "trial_container.h"

extern char **environ;

/* NAME as OURS, then the user's own value for a runtime, read before any was set (theirs
 * for this runtime, else the other's: each reads its own only). */
static int prepend(const char *name, const char *ours, const char *theirs, char sep)
{
	char *value;
	int rc;

	if (theirs && *theirs)
		rc = asprintf(&value, "%s%c%s", ours, sep, theirs);
	else
		rc = asprintf(&value, "%s", ours);
	if (rc < 0)
		return -1;
	rc = setenv(name, value, 1);
	free(value);
	return rc;
}

/* The user's values of a pair of twins, each runtime's own or else the other's. */
static void users_pair(const char *const names[AB_CONTAINER_RUNTIMES],
		       char *out[AB_CONTAINER_RUNTIMES])
{
	for (int i = 0; i < AB_CONTAINER_RUNTIMES; i++) {
		const char *v = getenv(names[i]);

		if (!v || !*v)
			v = getenv(names[!i]);
		out[i] = v && *v ? strdup(v) : NULL;
	}
}

int ab_trial_container_setenv(const char *name, const char *value)
{
	return setenv(name, value, 1) < 0 ? -1 : ab_env_set_container_twins(name, value);
}

/* Each AUTOBATCH_* variable's twins; a name too long for a twin is not the protocol's. */
static int autobatch_twins(void)
{
	char name[128];
	size_t n = 0;

	while (environ[n])
		n++;
	/* setenv may move environ: the names are copied from a snapshot of its pointers */
	char **snap = malloc((n + 1) * sizeof(*snap));
	if (!snap)
		return -1;
	memcpy(snap, environ, (n + 1) * sizeof(*snap));
	for (size_t k = 0; k < n; k++) {
		const char *eq = strchr(snap[k], '=');
		size_t len = eq ? (size_t)(eq - snap[k]) : 0;

		if (!eq || strncmp(snap[k], "AUTOBATCH_", 10) || len >= sizeof(name))
			continue;
		memcpy(name, snap[k], len);
		name[len] = '\0';
		if (ab_env_set_container_twins(name, eq + 1) < 0) { /* the variable itself is set already */
			free(snap);
			return -1;
		}
	}
	free(snap);
	return 0;
}

int ab_trial_container_env(const char *hook_dir, const char *trial_dir)
{
	static const char *const binds[] = AB_CONTAINER_BINDPATHS;
	const char *path = getenv("PYTHONPATH");
	char pp[AB_CONTAINER_RUNTIMES][96], *mounts = NULL;
	char *theirs[AB_CONTAINER_RUNTIMES] = {NULL}, *bound[AB_CONTAINER_RUNTIMES] = {NULL};
	const char *names[AB_CONTAINER_RUNTIMES] = {pp[0], pp[1]};
	int rc = -1;

	for (int i = 0; i < AB_CONTAINER_RUNTIMES; i++)
		if (ab_env_container_twin(i, "PYTHONPATH", pp[i], sizeof(pp[i])) < 0)
			return -1;
	users_pair(names, theirs);
	users_pair(binds, bound);
	if (autobatch_twins() < 0)
		goto out;
	/* PYTHONPATH's twins: the hook first, then the user's own twin; without one, what the
	 * container would have seen (PYTHONPATH, the hook already first on it) */
	for (int i = 0; hook_dir && i < AB_CONTAINER_RUNTIMES; i++)
		if ((theirs[i] ? prepend(pp[i], hook_dir, theirs[i], ':')
			       : path ? setenv(pp[i], path, 1) : 0) < 0)
			goto out;
	if ((hook_dir ? asprintf(&mounts, "%s:%s:ro,%s", hook_dir, hook_dir, trial_dir)
		      : asprintf(&mounts, "%s", trial_dir)) < 0)
		goto out;
	rc = 0;
	for (int i = 0; i < AB_CONTAINER_RUNTIMES && rc == 0; i++)
		rc = prepend(binds[i], mounts, bound[i], ',');
	free(mounts);
out:
	for (int i = 0; i < AB_CONTAINER_RUNTIMES; i++)
		free(theirs[i]), free(bound[i]);
	return rc;
}

int ab_trial_container_check(char *const *argv, char *err, size_t errlen)
{
	static const char *const verbs[] = {"run", "exec", "start", "container"};
	const char *name = ab_base_name(argv[0]);
	bool podman = !strcmp(name, "podman");

	if ((!podman && strcmp(name, "docker")) || !argv[1])
		return 0;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(argv[1], verbs[i]))
			return ab_fail(err, errlen, ENOTSUP,
				       "a trial cannot measure `%s %s`: its program runs under %s, "
				       "outside the command's processes, where a trial's memory "
				       "and its stop do not reach; run the program with Apptainer "
				       "(apptainer exec IMAGE ...) or pyxis (--container-image), or "
				       "give the trials a command that runs it directly "
				       "(--autobatch-trial-command)",
				       name, argv[1], podman ? "conmon" : "the docker daemon");
	return 0;
}
