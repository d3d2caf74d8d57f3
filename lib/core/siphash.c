/* siphash.c - SipHash-2-4, as the reference implementation defines it (see siphash.h). */
#include "siphash.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static uint64_t load64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void rounds(uint64_t v[4], int n)
{
	while (n--) {
		v[0] += v[1], v[1] = ROTL(v[1], 13), v[1] ^= v[0], v[0] = ROTL(v[0], 32);
		v[2] += v[3], v[3] = ROTL(v[3], 16), v[3] ^= v[2];
		v[0] += v[3], v[3] = ROTL(v[3], 21), v[3] ^= v[0];
		v[2] += v[1], v[1] = ROTL(v[1], 17), v[1] ^= v[2], v[2] = ROTL(v[2], 32);
	}
}

uint64_t ab_siphash24(const unsigned char key[16], const void *msg, size_t len)
{
	const unsigned char *p = msg;
	uint64_t k0 = load64(key), k1 = load64(key + 8), last = (uint64_t)len << 56, m;
	uint64_t v[4] = {k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
			 k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
	size_t whole = len - len % 8;

	for (size_t i = 0; i < whole; i += 8) {
		m = load64(p + i);
		v[3] ^= m;
		rounds(v, 2);
		v[0] ^= m;
	}
	for (size_t i = 0; i < len % 8; i++) /* the tail, under the length byte */
		last |= (uint64_t)p[whole + i] << (8 * i);
	v[3] ^= last;
	rounds(v, 2);
	v[0] ^= last;
	v[2] ^= 0xff;
	rounds(v, 4);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}
