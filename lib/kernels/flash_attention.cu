/* flash_attention.cu - causal self-attention in bf16 on tensor cores without the (T,T)
 * matrices, as FlashAttention-2: the forward keeps each query row's running max and sum and
 * saves only its log-sum-exp; the backward recomputes the probabilities a tile at a time.
 * q, k, v are read in place from the token-major qkv (B,T,3,NH,HS), the output written
 * token-major (B,T,C): no head split, no permute. Head sizes 64 and 128, T a multiple of 64.
 */
#include <stdio.h>
#include <string.h>
#include <type_traits>

#include "layers.cuh"

/* ---- one warp's tensor-core tiles --------------------------------------------------- */

/* mma.sync m16n8k16 (PTX ISA, "matrix fragments for mma.m16n8k16"), lane = 4 g + t:
 * A (16x16, row-major): a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8,
 * 2t+9], a[3] = A[g+8][2t+8, 2t+9]; B (16x8): b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g];
 * C (16x8, fp32): c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] = C[g+8][2t, 2t+1]. A register
 * holds two bf16, the lower index in its low half. */
__device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], const uint32_t b[2])
{
#ifdef AB_EMULATOR
	emu_mma_bf16_16816(c, a, b);
#else
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: four 8x8 bf16 matrices of shared
 * memory, each row's address given by one lane (lanes 8j..8j+7: matrix j's rows 0-7, 16
 * bytes each). r[j] = matrix j's row g, columns 2t, 2t+1: the B fragment of an mma whose k
 * runs along the rows; transposed, its rows 2t, 2t+1 at column g: k down the rows. */
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const bf16 *row)
{
#ifdef AB_EMULATOR
	emu_ldmatrix_x4(r, row, TRANS);
#else
	unsigned addr = (unsigned)__cvta_generic_to_shared(row);

	if constexpr (TRANS)
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
			     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
			     : "r"(addr));
	else
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
			     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
			     : "r"(addr));
#endif
}

/* two bf16 in one register: from two floats (rounded), from two stored values, from memory */
__device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
	return (uint32_t)__bfloat16_as_ushort(__float2bfloat16(lo)) |
	       (uint32_t)__bfloat16_as_ushort(__float2bfloat16(hi)) << 16;
}

/* a wider load or store through a pointer of another type, as the GPU does it; the
 * emulator's host compiler wants memcpy (strict aliasing) */
template <typename W> __device__ __forceinline__ W load_as(const void *p)
{
#ifdef AB_EMULATOR
	W w;

	memcpy(&w, p, sizeof(w));
	return w;
#else
	return *(const W *)p;
#endif
}

template <typename W> __device__ __forceinline__ void store_as(void *p, W w)
{
#ifdef AB_EMULATOR
	memcpy(p, &w, sizeof(w));
#else
	*(W *)p = w;
#endif
}

__device__ __forceinline__ uint32_t ld2(const bf16 *p)
{
	return load_as<uint32_t>(p);
}

/* 16 bytes, for the tiles' copies into shared memory (and their alignment there) */
struct alignas(16) u128 {
	uint32_t w[4];
};

enum { TILE = 64, WARPS = TILE / 16, THREADS = 32 * WARPS }; /* rows a block, 16 a warp */
enum { HALF = TILE / 2 };

/* rows [row0, row0 + TILE) of a token-major tensor whose rows are `stride` apart, HS wide,
 * into a shared tile padded to HS + 8 (a row's 16-byte pieces fall in different banks) */
template <int HS>
__device__ void load_tile(bf16 (*tile)[HS + 8], const bf16 *src, int row0, size_t stride)
{
	constexpr int PIECES = HS / 8;

	for (int i = threadIdx.x; i < TILE * PIECES; i += THREADS) {
		int r = i / PIECES, p = i % PIECES;

		store_as(&tile[r][p * 8], load_as<u128>(src + (size_t)(row0 + r) * stride + p * 8));
	}
}

/* a warp's 16 rows of X (HS wide) as A fragments, one per 16 columns */
template <int HS>
__device__ void load_rows(uint32_t a[HS / 16][4], const bf16 *src, int row0, size_t stride)
{
	int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;

	for (int kk = 0; kk < HS / 16; kk++) {
		const bf16 *r0 = src + (size_t)(row0 + g) * stride + kk * 16 + 2 * t;
		const bf16 *r8 = r0 + 8 * stride;

		a[kk][0] = ld2(r0);
		a[kk][1] = ld2(r8);
		a[kk][2] = ld2(r0 + 8);
		a[kk][3] = ld2(r8 + 8);
	}
}

/* s (16 x N) = X Y^T: the warp's rows of X (A fragments) against N rows of a tile of Y;
 * one ldmatrix gives the B fragments of two 16-wide steps (8 rows, 32 columns) */
template <int HS, int N = TILE>
__device__ void dot_rows(float s[N / 8][4], const uint32_t x[HS / 16][4],
			 const bf16 (*y)[HS + 8])
{
	int j = threadIdx.x % 32 / 8, r = threadIdx.x % 8; /* the matrix and row this lane names */

	for (int nt = 0; nt < N / 8; nt++) {
		s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
		for (int kk = 0; kk < HS / 16; kk += 2) {
			uint32_t b[4];

			ldmatrix_x4<false>(b, &y[nt * 8 + r][kk * 16 + j * 8]);
			mma_16816(s[nt], x[kk], b);
			mma_16816(s[nt], x[kk + 1], b + 2);
		}
	}
}

/* acc (16 x HS) += p (16 x N, as dot_rows leaves it) . Y (N rows of a tile, HS wide): the
 * accumulator of two column groups is the A fragment of one 16-wide step; one transposing
 * ldmatrix gives the B fragments of two column groups (rows k..k+15, columns 16 wide) */
template <int HS, int N = TILE>
__device__ void mul_tile(float acc[HS / 8][4], const float p[N / 8][4],
			 const bf16 (*y)[HS + 8])
{
	int j = threadIdx.x % 32 / 8, r = threadIdx.x % 8; /* the matrix and row this lane names */

	for (int kk = 0; kk < N / 16; kk++) {
		const float *lo = p[2 * kk], *hi = p[2 * kk + 1];
		uint32_t a[4] = {pack2(lo[0], lo[1]), pack2(lo[2], lo[3]), pack2(hi[0], hi[1]),
				 pack2(hi[2], hi[3])};

		for (int dt = 0; dt < HS / 8; dt += 2) {
			uint32_t b[4];

			ldmatrix_x4<true>(b, &y[kk * 16 + j % 2 * 8 + r][(dt + j / 2) * 8]);
			mma_16816(acc[dt], a, b);
			mma_16816(acc[dt + 1], a, b + 2);
		}
	}
}

/* a warp's 16 x HS result, times scale, into rows [row0, row0 + 16) of a token-major tensor */
template <int HS>
__device__ void store_rows(bf16 *dst, const float acc[HS / 8][4], float scale0, float scale8,
			   int row0, size_t stride)
{
	int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
	bf16 *r0 = dst + (size_t)(row0 + g) * stride + 2 * t, *r8 = r0 + 8 * stride;

	for (int dt = 0; dt < HS / 8; dt++) {
		store_as(r0 + dt * 8, pack2(acc[dt][0] * scale0, acc[dt][1] * scale0));
		store_as(r8 + dt * 8, pack2(acc[dt][2] * scale8, acc[dt][3] * scale8));
	}
}

/* the row (i < 2: g, else g + 8) and column (of the tile) of accumulator element i */
__device__ __forceinline__ int acc_row(int i)
{
	return threadIdx.x % 32 / 4 + (i >= 2 ? 8 : 0);
}

__device__ __forceinline__ int acc_col(int nt, int i)
{
	return nt * 8 + 2 * (threadIdx.x % 4) + (i & 1);
}

/* ---- kernels: grid (B*NH, T/TILE), THREADS a block, tiles of TILE rows ---------------- */

/* Blocks start in order of blockIdx.y; the ones with the most tiles to walk go first (the
 * causal mask makes the work grow with the query tile, shrink with the key tile), so the
 * last wave is short. */
__device__ __forceinline__ int tile_index(bool most_last)
{
	return most_last ? (int)(gridDim.y - 1 - blockIdx.y) : (int)blockIdx.y;
}

/* out (B,T,C) = softmax(scale q.k^T, causal) v; lse (B,NH,T) = each row's log2-sum-exp2 of
 * scale2 q.k (scale2 = scale * log2 e) */
template <int HS>
__global__ void flash_forward_kernel(bf16 *out, float *lse, const bf16 *qkv, int Tn, int NH,
				     float scale2)
{
	__shared__ u128 kraw[TILE * (HS + 8) / 8], vraw[TILE * (HS + 8) / 8];
	bf16(*ks)[HS + 8] = (bf16(*)[HS + 8])kraw, (*vs)[HS + 8] = (bf16(*)[HS + 8])vraw;
	int bh = (int)blockIdx.x, b = bh / NH, h = bh % NH, tile = tile_index(true);
	int q0 = tile * TILE + (int)threadIdx.x / 32 * 16; /* this warp's first query */
	size_t C = (size_t)NH * HS;
	const bf16 *base = qkv + (size_t)b * Tn * 3 * C + (size_t)h * HS;
	uint32_t qa[HS / 16][4];
	float o[HS / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

	load_rows<HS>(qa, base, q0, 3 * C);
	for (int j = 0; j <= tile; j++) {
		float s[TILE / 8][4], mx[2] = {m[0], m[1]}, sum[2] = {0.0f, 0.0f}, corr[2];

		__syncthreads(); /* every warp is done with the last tile */
		load_tile<HS>(ks, base + C, j * TILE, 3 * C);
		load_tile<HS>(vs, base + 2 * C, j * TILE, 3 * C);
		__syncthreads();
		dot_rows<HS>(s, qa, ks);
		for (int nt = 0; nt < TILE / 8; nt++)
			for (int i = 0; i < 4; i++) {
				bool future = j * TILE + acc_col(nt, i) > q0 + acc_row(i);

				s[nt][i] = future ? -INFINITY : s[nt][i] * scale2;
				mx[i / 2] = fmaxf(mx[i / 2], s[nt][i]);
			}
		/* every tile up to the diagonal holds a key at or before each row: mx is finite */
		for (int r = 0; r < 2; r++) {
			mx[r] = warp_max(mx[r], 4); /* the four lanes of a row */
			corr[r] = exp2f(m[r] - mx[r]);
			m[r] = mx[r];
		}
		for (int nt = 0; nt < TILE / 8; nt++)
			for (int i = 0; i < 4; i++) {
				s[nt][i] = exp2f(s[nt][i] - m[i / 2]);
				sum[i / 2] += s[nt][i];
			}
		for (int r = 0; r < 2; r++)
			l[r] = l[r] * corr[r] + warp_sum(sum[r], 4);
		for (int dt = 0; dt < HS / 8; dt++)
			for (int i = 0; i < 4; i++)
				o[dt][i] *= corr[i / 2];
		mul_tile<HS>(o, s, vs);
	}
	store_rows<HS>(out + (size_t)b * Tn * C + (size_t)h * HS, o, 1.0f / l[0], 1.0f / l[1], q0,
		       C);
	if (threadIdx.x % 4 == 0) {
		float *row = lse + (size_t)bh * Tn + q0 + acc_row(0);

		row[0] = m[0] + log2f(l[0]);
		row[8] = m[1] + log2f(l[1]);
	}
}

/* dsum (B,NH,T) = each row's dout . out, one warp a (b, t, head): token-major rows are
 * contiguous per head */
template <int HS>
__global__ void flash_dsum_kernel(float *dsum, const bf16 *dout, const bf16 *out, int Tn, int NH,
				  size_t rows)
{
	size_t r = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
	float v = 0.0f;

	if (r >= rows)
		return;
	for (int d = (int)threadIdx.x % 32; d < HS; d += 32)
		v += to_f(dout[r * HS + d]) * to_f(out[r * HS + d]);
	v = warp_sum(v);
	if (threadIdx.x % 32 == 0) {
		size_t bt = r / NH, b = bt / Tn, t = bt % Tn, h = r % NH;

		dsum[(b * NH + h) * Tn + t] = v;
	}
}

/* d(k) and d(v) of a tile of keys, over the query tiles at and after it: with p and dp
 * transposed (keys are the warp's rows), dv += p^T dout, dk += ds^T q, ds = p (dp - dsum).
 * A query tile goes in two halves of HALF: at head size 128, k and v's fragments and the two
 * accumulators hold 192 registers, and whole-tile p and dp would spill. */
template <int HS>
__global__ void flash_backward_kv_kernel(bf16 *dqkv, const bf16 *qkv, const bf16 *dout,
					 const float *lse, const float *dsum, int Tn, int NH,
					 float scale2, float scale)
{
	__shared__ u128 qraw[TILE * (HS + 8) / 8], draw[TILE * (HS + 8) / 8];
	__shared__ float ls[TILE], ds[TILE];
	bf16(*qs)[HS + 8] = (bf16(*)[HS + 8])qraw, (*dos)[HS + 8] = (bf16(*)[HS + 8])draw;
	int bh = (int)blockIdx.x, b = bh / NH, h = bh % NH, tile = tile_index(false);
	int k0 = tile * TILE + (int)threadIdx.x / 32 * 16; /* this warp's first key */
	size_t C = (size_t)NH * HS;
	const bf16 *base = qkv + (size_t)b * Tn * 3 * C + (size_t)h * HS;
	const bf16 *dbase = dout + (size_t)b * Tn * C + (size_t)h * HS;
	uint32_t ka[HS / 16][4], va[HS / 16][4];
	float dk[HS / 8][4] = {}, dv[HS / 8][4] = {};

	load_rows<HS>(ka, base + C, k0, 3 * C);
	load_rows<HS>(va, base + 2 * C, k0, 3 * C);
	for (int i = tile; i < Tn / TILE; i++) {
		float p[HALF / 8][4], dp[HALF / 8][4];

		__syncthreads();
		load_tile<HS>(qs, base, i * TILE, 3 * C);
		load_tile<HS>(dos, dbase, i * TILE, C);
		if (threadIdx.x < TILE) {
			ls[threadIdx.x] = lse[(size_t)bh * Tn + i * TILE + threadIdx.x];
			ds[threadIdx.x] = dsum[(size_t)bh * Tn + i * TILE + threadIdx.x];
		}
		__syncthreads();
		for (int half = 0; half < TILE; half += HALF) {
			dot_rows<HS, HALF>(p, ka, qs + half);   /* s^T: keys x queries */
			dot_rows<HS, HALF>(dp, va, dos + half); /* dp^T = v dout^T */
			for (int nt = 0; nt < HALF / 8; nt++)
				for (int e = 0; e < 4; e++) {
					int q = half + acc_col(nt, e);
					/* a query before the key sees nothing of it */
					bool past = i * TILE + q < k0 + acc_row(e);

					p[nt][e] = past ? 0.0f : exp2f(p[nt][e] * scale2 - ls[q]);
					dp[nt][e] = p[nt][e] * (dp[nt][e] - ds[q]);
				}
			mul_tile<HS, HALF>(dv, p, dos + half);
			mul_tile<HS, HALF>(dk, dp, qs + half);
		}
	}
	store_rows<HS>(dqkv + (size_t)b * Tn * 3 * C + C + (size_t)h * HS, dk, scale, scale, k0,
		       3 * C);
	store_rows<HS>(dqkv + (size_t)b * Tn * 3 * C + 2 * C + (size_t)h * HS, dv, 1.0f, 1.0f, k0,
		       3 * C);
}

/* d(q) of a tile of queries, over the key tiles up to it: dq += ds k */
template <int HS>
__global__ void flash_backward_q_kernel(bf16 *dqkv, const bf16 *qkv, const bf16 *dout,
					const float *lse, const float *dsum, int Tn, int NH,
					float scale2, float scale)
{
	__shared__ u128 kraw[TILE * (HS + 8) / 8], vraw[TILE * (HS + 8) / 8];
	bf16(*ks)[HS + 8] = (bf16(*)[HS + 8])kraw, (*vs)[HS + 8] = (bf16(*)[HS + 8])vraw;
	int bh = (int)blockIdx.x, b = bh / NH, h = bh % NH, tile = tile_index(true);
	int q0 = tile * TILE + (int)threadIdx.x / 32 * 16;
	size_t C = (size_t)NH * HS;
	const bf16 *base = qkv + (size_t)b * Tn * 3 * C + (size_t)h * HS;
	uint32_t qa[HS / 16][4], da[HS / 16][4];
	float dq[HS / 8][4] = {}, L[2], D[2];

	load_rows<HS>(qa, base, q0, 3 * C);
	load_rows<HS>(da, dout + (size_t)b * Tn * C + (size_t)h * HS, q0, C);
	for (int r = 0; r < 2; r++) {
		L[r] = lse[(size_t)bh * Tn + q0 + acc_row(2 * r)];
		D[r] = dsum[(size_t)bh * Tn + q0 + acc_row(2 * r)];
	}
	for (int j = 0; j <= tile; j++) {
		float p[TILE / 8][4], dp[TILE / 8][4];

		__syncthreads();
		load_tile<HS>(ks, base + C, j * TILE, 3 * C);
		load_tile<HS>(vs, base + 2 * C, j * TILE, 3 * C);
		__syncthreads();
		dot_rows<HS>(p, qa, ks);
		dot_rows<HS>(dp, da, vs); /* dp = dout v^T */
		for (int nt = 0; nt < TILE / 8; nt++)
			for (int e = 0; e < 4; e++) {
				bool future = j * TILE + acc_col(nt, e) > q0 + acc_row(e);

				p[nt][e] = future ? 0.0f : exp2f(p[nt][e] * scale2 - L[e / 2]);
				dp[nt][e] = p[nt][e] * (dp[nt][e] - D[e / 2]);
			}
		mul_tile<HS>(dq, dp, ks);
	}
	store_rows<HS>(dqkv + (size_t)b * Tn * 3 * C + (size_t)h * HS, dq, scale, scale, q0, 3 * C);
}

/* ---- launchers ---------------------------------------------------------------------- */

bool flash_attention_fits(int Tn, int C, int NH)
{
	int HS = NH > 0 && C % NH == 0 ? C / NH : 0;

	return (HS == 64 || HS == 128) && Tn > 0 && Tn % TILE == 0 && Tn / TILE <= 65535;
}

static int unfit(bool is_bf16, int Tn, int C, int NH)
{
	char why[160];

	snprintf(why, sizeof(why), "bf16, T %d, C %d, %d heads: bf16 only, head size 64 or 128, "
		 "T a multiple of %d", Tn, C, NH, (int)TILE);
	return ab_cuda_fail(-EINVAL, "flash attention", is_bf16 ? why : "fp32: bf16 only",
			    __FILE__, __LINE__);
}

static const float LOG2E = 1.4426950408889634f;

/* bf16 only: an fp32 step keeps the cuBLAS path (ab_gpt never asks for this one) */
template <typename T>
int flash_attention_forward(T *out, float *lse, const T *qkv, int B, int Tn, int C, int NH,
			    cudaStream_t s)
{
	if constexpr (!std::is_same<T, bf16>::value) {
		return unfit(false, Tn, C, NH);
	} else {
		if (!flash_attention_fits(Tn, C, NH))
			return unfit(true, Tn, C, NH);
		int HS = C / NH;
		dim3 grid((unsigned)(B * NH), (unsigned)(Tn / TILE));
		float scale2 = LOG2E / sqrtf((float)HS);

		if (HS == 64)
			flash_forward_kernel<64><<<grid, THREADS, 0, s>>>(out, lse, qkv, Tn, NH,
									  scale2);
		else
			flash_forward_kernel<128><<<grid, THREADS, 0, s>>>(out, lse, qkv, Tn, NH,
									   scale2);
		LAUNCH_CHECK();
		return 0;
	}
}

template <int HS>
static int backward(bf16 *dqkv, float *dsum, const bf16 *dout, const bf16 *out, const bf16 *qkv,
		    const float *lse, int B, int Tn, int NH, cudaStream_t s)
{
	size_t rows = (size_t)B * Tn * NH;
	dim3 grid((unsigned)(B * NH), (unsigned)(Tn / TILE));
	float scale = 1.0f / sqrtf((float)HS), scale2 = LOG2E * scale;

	flash_dsum_kernel<HS><<<ceil_div(rows, 8), 256, 0, s>>>(dsum, dout, out, Tn, NH, rows);
	LAUNCH_CHECK();
	flash_backward_kv_kernel<HS><<<grid, THREADS, 0, s>>>(dqkv, qkv, dout, lse, dsum, Tn, NH,
							      scale2, scale);
	LAUNCH_CHECK();
	flash_backward_q_kernel<HS><<<grid, THREADS, 0, s>>>(dqkv, qkv, dout, lse, dsum, Tn, NH,
							     scale2, scale);
	LAUNCH_CHECK();
	return 0;
}

template <typename T>
int flash_attention_backward(T *dqkv, float *dsum, const T *dout, const T *out, const T *qkv,
			     const float *lse, int B, int Tn, int C, int NH, cudaStream_t s)
{
	if constexpr (!std::is_same<T, bf16>::value) {
		return unfit(false, Tn, C, NH);
	} else {
		if (!flash_attention_fits(Tn, C, NH))
			return unfit(true, Tn, C, NH);
		if (C / NH == 64)
			return backward<64>(dqkv, dsum, dout, out, qkv, lse, B, Tn, NH, s);
		return backward<128>(dqkv, dsum, dout, out, qkv, lse, B, Tn, NH, s);
	}
}

#define INSTANTIATE(T)                                                                     \
	template int flash_attention_forward<T>(T *, float *, const T *, int, int, int, int,    \
						cudaStream_t);                                  \
	template int flash_attention_backward<T>(T *, float *, const T *, const T *, const T *, \
						 const float *, int, int, int, int,             \
						 cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16)
