/* column_sums.cu - column sums of (N, C) row-major gradients over every row: a bias's
 * gradient and layernorm's weight and bias gradients, in two passes that fill the GPU.
 */
#include "layers.cuh"

/* A block of 32 columns summing all N rows alone made C/32 blocks (24 for GPT-2 124M's 768
 * channels on 132 SMs), each walking 100k rows: layernorm took 19% of the H100 step. Now
 * block (x, y) sums columns 32x.. over chunk y of the rows into scratch, and one thread a
 * column adds the chunks in order: deterministic, unlike atomics. */
#define COLSUM_MIN_ROWS 8     /* rows of a chunk, at least */
#define COLSUM_MAX_ROWS 256   /* and at most */
#define COLSUM_CHUNKS 128     /* chunks aimed for: with C/32 blocks each, the GPU is full */

/* ---- kernels ------------------------------------------------------------------------ */

/* partial (chunks, 2C) with inp: [sum dy * (inp - mean) * rstd | sum dy]; without: (chunks,
 * C) of sum dy. Block (32, 8): 8 row lanes down the chunk, summed in shared memory. */
template <typename T>
__global__ void column_partial_kernel(float *partial, const T *dout, const T *inp,
				      const float *mean, const float *rstd, size_t N, int C,
				      int rows)
{
	__shared__ float sw[8][33], sb[8][33];
	int c = blockIdx.x * 32 + threadIdx.x;
	size_t r0 = (size_t)blockIdx.y * rows, r1 = r0 + rows < N ? r0 + rows : N;
	float aw = 0, ab = 0;

	if (c < C)
		for (size_t r = r0 + threadIdx.y; r < r1; r += 8) {
			float dy = to_f(dout[r * C + c]);

			if (inp)
				aw += (to_f(inp[r * C + c]) - mean[r]) * rstd[r] * dy;
			ab += dy;
		}
	sw[threadIdx.y][threadIdx.x] = aw;
	sb[threadIdx.y][threadIdx.x] = ab;
	__syncthreads();
	if (threadIdx.y != 0 || c >= C)
		return;
	for (int y = 1; y < 8; y++) {
		aw += sw[y][threadIdx.x];
		ab += sb[y][threadIdx.x];
	}
	float *p = partial + (size_t)blockIdx.y * (inp ? 2 * C : C);
	if (inp)
		p[c] = aw, p[C + c] = ab;
	else
		p[c] = ab;
}

/* dw (C; NULL for a bias) and db (C) += the chunks' partials, added in chunk order */
template <typename T>
__global__ void column_finish_kernel(T *dw, T *db, const float *partial, int chunks, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, width = dw ? 2 * C : C;
	float aw = 0, ab = 0;

	if (c >= C)
		return;
	for (int k = 0; k < chunks; k++) {
		const float *p = partial + (size_t)k * width;

		if (dw)
			aw += p[c];
		ab += p[dw ? C + c : c];
	}
	if (dw)
		dw[c] = from_f<T>(to_f(dw[c]) + aw);
	db[c] = from_f<T>(to_f(db[c]) + ab);
}

/* ---- launcher ----------------------------------------------------------------------- */

template <typename T>
int column_sums(T *dw, T *db, const T *dout, const T *inp, const float *mean,
		const float *rstd, size_t N, int C, float *scratch, size_t scratch_bytes,
		cudaStream_t s)
{
	size_t width = (size_t)(inp ? 2 * C : C) * sizeof(float), rows, chunks, fit;

	rows = (N + COLSUM_CHUNKS - 1) / COLSUM_CHUNKS;
	rows = rows < COLSUM_MIN_ROWS ? COLSUM_MIN_ROWS : rows > COLSUM_MAX_ROWS ? COLSUM_MAX_ROWS : rows;
	chunks = N ? (N + rows - 1) / rows : 1;
	fit = scratch ? scratch_bytes / width : 0;
	if (!fit)
		return ab_cuda_fail(-EINVAL, "column_sums", "no scratch for one chunk's sums",
				    __FILE__, __LINE__);
	if (chunks > fit) /* fewer, longer chunks */
		chunks = fit, rows = (N + fit - 1) / fit;
	column_partial_kernel<<<dim3(ceil_div((size_t)C, 32), (unsigned)chunks), dim3(32, 8), 0,
				s>>>(scratch, dout, inp, mean, rstd, N, C, (int)rows);
	LAUNCH_CHECK();
	column_finish_kernel<<<ceil_div((size_t)C, 256), 256, 0, s>>>(inp ? dw : (T *)NULL, db,
								       scratch, (int)chunks, C);
	LAUNCH_CHECK();
	return 0;
}

#define INSTANTIATE(T)                                                                     \
	template int column_sums<T>(T *, T *, const T *, const T *, const float *,          \
				    const float *, size_t, int, float *, size_t, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16)
