/* launcher_config.c - how many workers a launcher starts where only its own config file
 * says: accelerate launch's num_processes (see presets.h). Read in srun, as the user.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_edit.h"
#include "error.h"
#include "protocol.h"
#include "number.h"
#include "presets.h"

/* accelerate's default config file, as accelerate/commands/config/config_args.py names it:
 * expanduser($HF_HOME or $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface)/accelerate/
 * default_config.yaml; 0, or -1 when it cannot be named. */
static int default_file(char *buf, size_t len)
{
	const char *hf = getenv("HF_HOME"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char base[PATH_MAX];
	int n;

	/* set but empty is os.environ's "": then a relative accelerate/ */
	if (hf)
		n = snprintf(base, sizeof(base), "%s", hf);
	else if (xdg)
		n = snprintf(base, sizeof(base), "%s%shuggingface", xdg, xdg[0] ? "/" : "");
	else
		n = snprintf(base, sizeof(base), "~/.cache/huggingface");
	if (n < 0 || (size_t)n >= sizeof(base))
		return -1;
	if (base[0] == '~' && (base[1] == '/' || !base[1])) { /* expanduser */
		if (!home || !*home)
			return -1;
		n = snprintf(buf, len, "%s%s/accelerate/default_config.yaml", home, base + 1);
	} else {
		n = snprintf(buf, len, "%s%saccelerate/default_config.yaml", base,
			     base[0] ? "/" : "");
	}
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

long ab_launcher_config_workers(int argc, char *const argv[], const char *dir, bool *world)
{
	const char *name = ab_launcher_name(argc, argv), *given;
	char path[PATH_MAX], value[32], err[AB_ERR_MAX];
	struct ab_config *cfg = NULL;
	struct stat st;
	long n = -1;

	*world = false;
	if (!name ||
	    (strcmp(name, "accelerate launch") && strcmp(name, "accelerate.commands.launch")) ||
	    ab_launcher_option(argc, argv, "--num_processes", "--num-processes"))
		return -1;
	given = ab_launcher_option(argc, argv, "--config_file", "--config-file");
	/* relative to where the tasks start: dir (srun -D), else here */
	if (given && ab_step_path(dir, given, path, sizeof(path)) < 0)
		return -1;
	if (!given && default_file(path, sizeof(path)) < 0)
		return -1;
	/* no default file (os.path.isfile): accelerate starts one process per GPU it sees, in
	 * all, split over --num_machines: per node only where that is 1 */
	if (!given && (stat(path, &st) < 0 || !S_ISREG(st.st_mode))) {
		const char *m = ab_launcher_option(argc, argv, "--num_machines", "--num-machines");

		return m && strcmp(m, "1") ? -1 : 0;
	}
	*world = true;
	if (ab_config_load(path, AB_FORMAT_AUTO, &cfg, err, sizeof(err)) == 0 &&
	    ab_config_get(cfg, "num_processes", -1, value, sizeof(value), err, sizeof(err)) == 0 &&
	    ab_parse_whole(value, 1, 1 << 20, &n) < 0)
		n = -1; /* -1 there: accelerate asks for --num_processes */
	ab_config_free(cfg);
	return n;
}
