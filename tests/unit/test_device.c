/* test_device.c - what --device names (lib/probe/device.c): sim specs, the host and its
 * capacity, cuda:N through the probe's CUDA hooks (here a stand-in GPU of our own hook
 * interface, as a build without a GPU has none), and every refusal with its message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "unit.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "device.h"

#define GiB (1024ULL * 1024 * 1024)

static char err[512];

static void sim_and_host(void **state)
{
	struct ab_device d;

	(void)state;
	assert_int_equal(ab_device_open("sim:total=80GiB,base=12GiB,per_sample=300MiB", &d, err,
					sizeof(err)),
			 0);
	assert_int_equal(d.kind, AB_DEVICE_SIM);
	assert_int_equal(d.total_bytes, 80 * GiB);
	assert_string_equal(ab_device_kind_name(d.kind), "sim");
	ab_device_close(&d);
	assert_int_equal(ab_device_open("host", &d, err, sizeof(err)), 0);
	assert_int_equal(d.kind, AB_DEVICE_HOST);
	assert_int_equal(d.total_bytes,
			 (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE));
	ab_device_close(&d);
	assert_int_equal(ab_device_open("host:capacity=2GiB", &d, err, sizeof(err)), 0);
	assert_int_equal(d.total_bytes, 2 * GiB);
	ab_device_close(&d);
}

static void refusals(void **state)
{
	struct ab_device d;

	(void)state;
	assert_int_equal(ab_device_open("host:size=2GiB", &d, err, sizeof(err)), -EINVAL);
	assert_contains(err, "the only option is capacity=SIZE");
	assert_int_equal(ab_device_open("host:capacity=0", &d, err, sizeof(err)), -EINVAL);
	assert_contains(err, "more than 0 bytes");
	assert_int_equal(ab_device_open("host:capacity=lots", &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(ab_device_open("sim:total=1e9", &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(ab_device_open("tpu:0", &d, err, sizeof(err)), -EINVAL);
	assert_contains(err, "unknown device 'tpu:0': use cuda:N, host[:capacity=SIZE] or sim:SPEC");
	/* no CUDA hooks: nothing pretends to measure a GPU */
	ab_device_set_cuda(NULL);
	assert_int_equal(ab_device_open("cuda:0", &d, err, sizeof(err)), -ENODEV);
	assert_contains(err, "not available in this build");
	assert_int_equal(ab_device_open(NULL, &d, err, sizeof(err)), -EINVAL);
	assert_contains(err, "no GPU is visible here");
}

/* A stand-in GPU behind the probe's hook interface: two GPUs, index 1 fails to open. */
static int fake_count(void)
{
	return 2;
}

static int fake_open(int index, char *name, size_t namelen, char *bus, size_t buslen,
		     uint64_t *total, char *e, size_t elen)
{
	if (index != 0) {
		snprintf(e, elen, "cuda:%d: out of reach", index);
		return -ENODEV;
	}
	snprintf(name, namelen, "Stand-in H100");
	snprintf(bus, buslen, "00000000:00:00.0");
	*total = 80 * GiB;
	return 0;
}

static void cuda_through_hooks(void **state)
{
	const struct ab_cuda_ops ops = {fake_open, fake_count};
	struct ab_device d;

	(void)state;
	ab_device_set_cuda(&ops);
	assert_int_equal(ab_device_open(NULL, &d, err, sizeof(err)), 0); /* cuda:0 when visible */
	assert_int_equal(d.kind, AB_DEVICE_CUDA);
	assert_int_equal(d.index, 0);
	assert_string_equal(d.name, "Stand-in H100");
	assert_int_equal(d.total_bytes, 80 * GiB);
	ab_device_close(&d);
	assert_int_equal(ab_device_open("cuda:1", &d, err, sizeof(err)), -ENODEV);
	assert_contains(err, "cuda:1: out of reach");
	assert_int_equal(ab_device_open("cuda:1024", &d, err, sizeof(err)), -EINVAL);
	assert_contains(err, "write cuda:N, N the GPU's index");
	assert_int_equal(ab_device_open("cuda:-1", &d, err, sizeof(err)), -EINVAL);
	assert_int_equal(ab_device_open("cuda:0x1", &d, err, sizeof(err)), -EINVAL);
	ab_device_set_cuda(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sim_and_host),
		cmocka_unit_test(refusals),
		cmocka_unit_test(cuda_through_hooks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
