/* matmul.cu - the linear layers through cuBLAS (fp32 accumulation whatever the storage
 * type), plus the bias add and the bias gradient. Row-major tensors are read by cuBLAS as
 * their column-major transposes, as in llm.c. The bias gradient is column_sums'.
 */
#include "layers.cuh"

/* ---- kernels ------------------------------------------------------------------------ */

template <typename T>
__global__ void add_bias_kernel(T *out, const T *bias, size_t n, int OC)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = from_f<T>(to_f(out[i]) + to_f(bias[i % OC]));
}

/* ---- launchers ---------------------------------------------------------------------- */

template <typename T>
int gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, const T *A, int lda,
	 long long sa, const T *B, int ldb, long long sb, float beta, T *Cm, int ldc,
	 long long sc, int batch)
{
	const float one = 1.0f;
	cudaDataType_t dt = cuda_dtype<T>::value;
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;

	if (batch == 1)
		CUBLAS_CHECK(cublasGemmEx(h, oa, ob, m, n, k, &one, A, dt, lda, B, dt, ldb, &beta,
					  Cm, dt, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	else
		CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, oa, ob, m, n, k, &one, A, dt, lda, sa,
							B, dt, ldb, sb, &beta, Cm, dt, ldc, sc,
							batch, CUBLAS_COMPUTE_32F,
							CUBLAS_GEMM_DEFAULT));
	return 0;
}

template <typename T>
int matmul_forward(cublasHandle_t h, T *out, const T *inp, const T *w, const T *bias, int N,
		   int C, int OC, cudaStream_t s)
{
	size_t n = (size_t)N * OC;

	/* out^T (OC,N) = w (OC,C) . inp^T (C,N) */
	TRY(gemm<T>(h, true, false, OC, N, C, w, C, 0, inp, C, 0, 0.0f, out, OC, 0, 1));
	if (bias) {
		add_bias_kernel<<<grid_for(n, 256), 256, 0, s>>>(out, bias, n, OC);
		LAUNCH_CHECK();
	}
	return 0;
}

template <typename T>
int matmul_backward(cublasHandle_t h, T *dinp, T *dw, T *dbias, const T *dout, const T *inp,
		    const T *w, int N, int C, int OC, float *scratch, size_t scratch_bytes,
		    cudaStream_t s)
{
	/* dinp^T (C,N) = w^T (C,OC) . dout^T (OC,N) */
	TRY(gemm<T>(h, false, false, C, N, OC, w, C, 0, dout, OC, 0, 0.0f, dinp, C, 0, 1));
	/* dw^T (C,OC) += inp^T (C,N) . dout (N,OC) */
	TRY(gemm<T>(h, false, true, C, OC, N, inp, C, 0, dout, OC, 0, 1.0f, dw, C, 0, 1));
	if (dbias)
		TRY(column_sums<T>((T *)NULL, dbias, dout, (const T *)NULL, NULL, NULL, (size_t)N,
				   OC, scratch, scratch_bytes, s));
	return 0;
}

#define INSTANTIATE(T)                                                                     \
	template int gemm<T>(cublasHandle_t, bool, bool, int, int, int, const T *, int,     \
			     long long, const T *, int, long long, float, T *, int,         \
			     long long, int);                                               \
	template int matmul_forward<T>(cublasHandle_t, T *, const T *, const T *,           \
				       const T *, int, int, int, cudaStream_t);             \
	template int matmul_backward<T>(cublasHandle_t, T *, T *, T *, const T *,           \
					const T *, const T *, int, int, int, float *, size_t, \
					cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16)
