/* test_gpu_models.c - the GPU models of a step's nodes (lib/core/gpu_models.c): GRES strings
 * as Slurm 22.05-26.05 print them, the set that keys the cache, the smallest measured model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "unit.h"
#include <string.h>

#include <errno.h>

#include "gpu_models.h"
#include "step_gpus.h"

static void collect(const char *type, void *arg)
{
	char *out = arg;

	strcat(out, "[");
	strcat(out, type);
	strcat(out, "]");
}

static void gres_strings(void **state)
{
	char out[256];

	(void)state;
	struct {
		const char *gres, *types;
		int n;
	} cases[] = {
		{"gpu:a100:4", "[a100]", 1},
		{"gpu:a100:4(S:0-1)", "[a100]", 1},
		{"gpu:a100:2(S:0,1),gpu:h100:2(S:1)", "[a100][h100]", 2},
		{"nic:1,gpu:big:4,mps:400", "[big]", 1},
		{"gpu:4", "[]", 1},
		{"gpu:4(S:0)", "[]", 1},
		{"gpu", "[]", 1},
		{"gpu:small", "[small]", 1},
		{"gpus:2,gpufoo:1", "", 0},
		{"(null)", "", 0},
		{"", "", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		out[0] = '\0';
		assert_int_equal(ab_gres_gpu_types(cases[i].gres, collect, out), cases[i].n);
		assert_string_equal(out, cases[i].types);
	}
	assert_int_equal(ab_gres_gpu_types(NULL, collect, out), 0);
}

/* one model on other nodes keys alike; another model, or a mixed step, does not; a node
 * without a type leaves the key to the node names */
static void keys(void **state)
{
	struct ab_gpu_models a = {0}, b = {0}, c = {0}, d = {0};
	char ka[64], kb[64], kc[64], kd[64];

	(void)state;
	ab_gpu_models_add(&a, "node1", "gpu:big:4");
	ab_gpu_models_add(&a, "node2", "gpu:big:4(S:0)");
	ab_gpu_models_add(&b, "node7", "gpu:big:8");
	ab_gpu_models_add(&c, "node3", "gpu:small:2");
	ab_gpu_models_add(&c, "node1", "gpu:big:4");
	ab_gpu_models_add(&d, "node1", "gpu:big:4");
	ab_gpu_models_add(&d, "node9", "gpu:2");
	ab_gpu_models_key(&a, ka, sizeof(ka));
	ab_gpu_models_key(&b, kb, sizeof(kb));
	ab_gpu_models_key(&c, kc, sizeof(kc));
	ab_gpu_models_key(&d, kd, sizeof(kd));
	assert_string_equal(ka, "gpu:big");
	assert_string_equal(ka, kb);
	assert_string_equal(kc, "gpu:big,small");
	assert_string_equal(kd, "");
	assert_int_equal(a.n, 1);
	assert_int_equal(a.v[0].nodes, 2);
	assert_string_equal(a.v[0].node, "node1");
	assert_int_equal(c.n, 2);
	assert_string_equal(c.v[0].type, "small");
	assert_string_equal(c.v[0].node, "node3");
}

static void smallest(void **state)
{
	struct ab_gpu_models m = {0};

	(void)state;
	ab_gpu_models_add(&m, "node1", "gpu:big:4");
	ab_gpu_models_add(&m, "node2", "gpu:big:4");
	ab_gpu_models_add(&m, "node3", "gpu:small:2");
	assert_null(ab_gpu_models_smallest(&m));
	m.v[0].total_bytes = 256u << 20;
	assert_string_equal(ab_gpu_models_smallest(&m)->type, "big");
	m.v[1].total_bytes = 128u << 20;
	assert_string_equal(ab_gpu_models_smallest(&m)->node, "node3");
	assert_int_equal(m.v[0].nodes, 2);
}

/* each measured model's memory and nodes, as the plugin hands it to the probe, and back */
static void node_memory(void **state)
{
	struct ab_gpu_models m = {0}, u = {0};
	struct ab_node_memory t;
	char spec[256], err[256], big[AB_GPU_NODES_MAX + 8];

	(void)state;
	ab_gpu_models_add(&m, "node1", "gpu:big:4");
	ab_gpu_models_add(&m, "node3", "gpu:small:2");
	ab_gpu_models_add(&m, "node2", "gpu:big:4");
	assert_int_equal(ab_gpu_models_node_memory(&m, spec, sizeof(spec)), -ENODATA);
	m.v[0].total_bytes = 268435456;
	m.v[1].total_bytes = 134217728;
	assert_int_equal(ab_gpu_models_node_memory(&m, spec, sizeof(spec)), 0);
	assert_string_equal(spec, "268435456:node1,node2;134217728:node3");
	assert_int_equal(ab_gpu_models_node_memory(&m, spec, 20), -E2BIG);
	assert_int_equal(ab_node_memory_parse("268435456:node1,node2;134217728:node3", &t, err,
					      sizeof(err)), 0);
	assert_int_equal(t.n, 3);
	assert_true(ab_node_memory_of(&t, "node2") == 268435456);
	assert_true(ab_node_memory_of(&t, "node3") == 134217728);
	assert_true(ab_node_memory_of(&t, "node4") == 0);
	/* a node of two models is held to the smaller */
	assert_int_equal(ab_node_memory_parse("300:a,b;200:b", &t, err, sizeof(err)), 0);
	assert_true(ab_node_memory_of(&t, "b") == 200 && ab_node_memory_of(&t, "a") == 300);
	assert_int_equal(ab_node_memory_parse("x:node1", &t, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--node-memory: 'x' is no count of bytes");
	assert_int_equal(ab_node_memory_parse("12:no/de", &t, err, sizeof(err)), -EINVAL);
	assert_int_equal(ab_node_memory_parse("12", &t, err, sizeof(err)), -EINVAL);
	assert_int_equal(ab_node_memory_parse("12:", &t, err, sizeof(err)), -EINVAL);
	assert_int_equal(ab_node_memory_parse("", &t, err, sizeof(err)), -EINVAL);
	/* a model whose nodes overflow its list: no table, each rank then held to the probed one */
	for (int i = 0; i < 200; i++) {
		snprintf(big, sizeof(big), "node%04d", i);
		ab_gpu_models_add(&u, big, "gpu:big:4");
	}
	u.v[0].total_bytes = 1;
	assert_true(u.unlisted);
	assert_int_equal(ab_gpu_models_node_memory(&u, spec, sizeof(spec)), -ENODATA);
}

/* A step's GPU request as its record holds it (22.05's forms as measured on the testbed,
 * later releases' "gres/" and "=") and the srun options its trial steps get. */
static void step_options(void **state)
{
	struct ab_step_gpus g;
	char err[256], all[1024];

	(void)state;
	struct {
		const char *task, *node, *step, *bind, *cpus, *want;
	} cases[] = {
		{"gres:gpu:1", NULL, "cpu:4", "gpu:closest", "gres:gpu:1",
		 "--gpus-per-task=1 --cpus-per-gpu=1 --gpu-bind=closest"},
		{"cpu=2,gres/gpu=1", "", "", "gres/gpu:map_gpu:0,1", NULL,
		 "--gpus-per-task=1 --gpu-bind=map_gpu:0,1"},
		{NULL, "gres:gpu:big:2", "cpu:4", NULL, NULL, "--gres=gpu:big:2"},
		{NULL, "gres/gpu:big:1,gres/nic:1", NULL, NULL, NULL, "--gres=gpu:big:1,nic:1"},
		{NULL, NULL, "cpu:4,gres:gpu:3", NULL, NULL, "--gpus=3"},
		{"gres:gpu:a100:2", NULL, NULL, "verbose,gpu:closest", NULL,
		 "--gpus-per-task=a100:2 --gpu-bind=closest"},
		{"gres:nic:1", NULL, "cpu:8", "", "", ""}, /* no GPU: the job's default */
		{NULL, NULL, NULL, NULL, NULL, ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = 0;

		assert_int_equal(ab_step_gpus_from_tres(cases[i].task, cases[i].node, cases[i].step,
							cases[i].bind, cases[i].cpus, &g, err,
							sizeof(err)),
				 0);
		all[0] = '\0';
		for (int k = 0; k < g.n; k++) {
			len += (size_t)snprintf(all + len, sizeof(all) - len, "%s%s", k ? " " : "",
						g.opt[k]);
			assert_true(ab_step_option_ok(g.opt[k]));
		}
		assert_string_equal(all, cases[i].want);
	}
	/* what srun must never be handed: a value that is not a GRES, another option */
	assert_int_equal(ab_step_gpus_from_tres("gres:gpu:1;rm", NULL, NULL, NULL, NULL, &g, err,
						sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "gres:gpu:1;rm"));
	assert_false(ab_step_option_ok("--gpus-per-task=1 --uid=0"));
	assert_false(ab_step_option_ok("--uid=0"));
	assert_false(ab_step_option_ok("--gpus-per-task="));
	assert_false(ab_step_option_ok("--gres=gpu:1$(id)"));
	assert_true(ab_step_option_ok("--gres=gpu:big:2"));
	/* the step's GPUs in all (4 tasks on 2 nodes) */
	struct {
		const char *task, *node, *step;
		unsigned want;
	} counts[] = {
		{"gres:gpu:2", NULL, NULL, 8},        {"gres:gpu:a100:1", NULL, NULL, 4},
		{NULL, "gres:gpu:big:4", NULL, 8},    {NULL, "gres/nic:1,gres/gpu:3", NULL, 6},
		{NULL, "gres:gpu", NULL, 2},          {NULL, NULL, "cpu:4,gres:gpu:6", 6},
		{NULL, "gres:nic:1", NULL, 0},        {NULL, NULL, NULL, 0},
	};
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		assert_int_equal(ab_step_gpus_from_tres(counts[i].task, counts[i].node, counts[i].step,
							NULL, NULL, &g, err, sizeof(err)),
				 0);
		if (ab_step_gpus_count(&g, 4, 2) != counts[i].want)
			fail_msg("case %zu: %u GPUs, want %u", i, ab_step_gpus_count(&g, 4, 2),
				 counts[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gres_strings),
		cmocka_unit_test(keys),
		cmocka_unit_test(smallest),
		cmocka_unit_test(node_memory),
		cmocka_unit_test(step_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
