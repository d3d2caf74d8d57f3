/* cmd_presets.c - `autobatch-probe presets`: the framework table, as users need to see it
 * to pick --preset or --key.
 */
#include <stdio.h>

#include "commands.h"
#include "presets.h"

void presets_usage(FILE *out)
{
	fprintf(out, "Usage: autobatch-probe presets\n");
}

int cmd_presets(int argc, char **argv)
{
	(void)argv;
	if (argc > 1) {
		presets_usage(stderr);
		return 2;
	}
	for (size_t i = 0; i < ab_npresets; i++) {
		const struct ab_preset *p = &ab_presets[i];

		printf("%s\t%s\n", p->name, p->frameworks);
		for (int r = 0; r < AB_ROLE_COUNT; r++)
			if (p->keys[r])
				printf("\t%-13s %s\n", ab_role_name((enum ab_role)r), p->keys[r]);
	}
	return 0;
}
