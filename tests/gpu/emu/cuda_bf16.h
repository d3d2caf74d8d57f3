/* cuda_bf16.h (emulator) - the bf16 type as the kernels and tests use it on the host: storage,
 * round-to-nearest-even from float, exact widening to float. No CUDA toolkit is needed.
 */
#ifndef AUTOBATCH_EMU_CUDA_BF16_H
#define AUTOBATCH_EMU_CUDA_BF16_H

#include <cstdint>
#include <cstring>

struct __nv_bfloat16;
inline __nv_bfloat16 __float2bfloat16(float f);
inline float __bfloat162float(__nv_bfloat16 h);

struct __nv_bfloat16 {
	uint16_t x;
	__nv_bfloat16() = default;
	__nv_bfloat16(float f) { *this = __float2bfloat16(f); }
	operator float() const { return __bfloat162float(*this); }
};

/* the toolkit's rounding: nearest, ties to even; a NaN stays a (quiet) NaN */
inline __nv_bfloat16 __float2bfloat16(float f)
{
	__nv_bfloat16 h;
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		h.x = (uint16_t)((u >> 16) | 0x40u);
	else
		h.x = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
	return h;
}

inline float __bfloat162float(__nv_bfloat16 h)
{
	uint32_t u = (uint32_t)h.x << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* the bits, as the toolkit's reinterpreting conversions give them */
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h)
{
	return h.x;
}

#endif
