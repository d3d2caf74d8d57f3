/* layers.cuh - the launchers of every layer family, templated on the storage type (float or
 * bf16). One file per family implements them; each checks its launches and returns 0,
 * -ENOMEM or -EIO. N = rows (B*T), C = channels, OC = output channels.
 */
#ifndef AUTOBATCH_LAYERS_CUH
#define AUTOBATCH_LAYERS_CUH

#include "cuda_common.cuh"

/* encoder.cu: out (B,T,C) = wte[inp] + wpe[t]; backward accumulates dwte (atomics), dwpe */
template <typename T>
int encoder_forward(T *out, const int *inp, const T *wte, const T *wpe, int B, int Tn, int C,
		    cudaStream_t s);
template <typename T>
int encoder_backward(T *dwte, T *dwpe, const T *dout, const int *inp, int B, int Tn, int C,
		     cudaStream_t s);

/* column_sums.cu: db (C) += column sums of dout (N,C); with inp (a layernorm's input, its
 * mean and rstd, N), also dw (C) += column sums of dout * (inp - mean) * rstd. scratch holds
 * the chunks' partial sums: at least C (2C with inp) floats; more chunks fill the GPU */
template <typename T>
int column_sums(T *dw, T *db, const T *dout, const T *inp, const float *mean,
		const float *rstd, size_t N, int C, float *scratch, size_t scratch_bytes,
		cudaStream_t s);

/* layernorm.cu: out (N,C); mean, rstd (N) fp32; backward adds into dinp, dw, db, its
 * parameters' sums in scratch (column_sums) */
template <typename T>
int layernorm_forward(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b,
		      size_t N, int C, cudaStream_t s);
template <typename T>
int layernorm_backward(T *dinp, T *dw, T *db, const T *dout, const T *inp, const T *w,
		       const float *mean, const float *rstd, size_t N, int C, float *scratch,
		       size_t scratch_bytes, cudaStream_t s);

/* matmul.cu: out (N,OC) = inp (N,C) @ w (OC,C)^T + bias (OC, or NULL); backward writes
 * dinp (N,C), adds into dw (OC,C) and dbias (OC, its sums in scratch: column_sums) */
template <typename T>
int matmul_forward(cublasHandle_t h, T *out, const T *inp, const T *w, const T *bias, int N,
		   int C, int OC, cudaStream_t s);
template <typename T>
int matmul_backward(cublasHandle_t h, T *dinp, T *dw, T *dbias, const T *dout, const T *inp,
		    const T *w, int N, int C, int OC, float *scratch, size_t scratch_bytes,
		    cudaStream_t s);
/* C (m,n col-major) = alpha op(A) op(B) + beta C, batched with strides; compute in fp32 */
template <typename T>
int gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, const T *A, int lda,
	 long long sa, const T *B, int ldb, long long sb, float beta, T *Cm, int ldc,
	 long long sc, int batch);

/* attention.cu: qkv (B,T,3C) -> qkvr (3,B,NH,T,HS) saved, att (B,NH,T,T) causal softmax
 * saved, out (B,T,C). preatt (B,NH,T,T) and vaccum (B,T,C) are scratch; vaccum may be qkv. */
template <typename T>
int attention_forward(cublasHandle_t h, T *out, T *qkvr, T *att, T *preatt, T *vaccum,
		      const T *qkv, int B, int Tn, int C, int NH, cudaStream_t s);
/* dout (B,T,C) -> dqkv (B,T,3C). Scratch: datt (B,NH,T,T), dqkvr (3,B,NH,T,HS) which may be
 * dout's buffer, dvaccum (B,T,C) which may be dqkv's buffer. */
template <typename T>
int attention_backward(cublasHandle_t h, T *dqkv, T *datt, T *dqkvr, T *dvaccum, const T *dout,
		       const T *qkvr, const T *att, int B, int Tn, int C, int NH,
		       cudaStream_t s);

/* flash_attention.cu: bf16 attention without the (T,T) matrices. qkv (B,T,3C) is read in
 * place and saved as it is; out (B,T,C); lse (B,NH,T) fp32 saved, each row's log2-sum-exp2.
 * The backward writes dqkv (B,T,3C) from dout (B,T,C), out and lse; dsum (B,NH,T) fp32 is
 * scratch. Only bf16 where flash_attention_fits (head size 64 or 128, T a multiple of 64);
 * elsewhere, and for fp32, -EINVAL. */
bool flash_attention_fits(int Tn, int C, int NH);
template <typename T>
int flash_attention_forward(T *out, float *lse, const T *qkv, int B, int Tn, int C, int NH,
			    cudaStream_t s);
template <typename T>
int flash_attention_backward(T *dqkv, float *dsum, const T *dout, const T *out, const T *qkv,
			     const float *lse, int B, int Tn, int C, int NH, cudaStream_t s);

/* activations.cu: GELU (tanh), its backward dinp = gelu'(inp) * dout (dinp may be dout),
 * residual out = a + b */
template <typename T> int gelu_forward(T *out, const T *inp, size_t n, cudaStream_t s);
template <typename T>
int gelu_backward(T *dinp, const T *inp, const T *dout, size_t n, cudaStream_t s);
template <typename T> int residual_forward(T *out, const T *a, const T *b, size_t n, cudaStream_t s);

/* loss.cu: logits (N,V) become d(mean loss)/d(logits) in place; losses (N) fp32 */
template <typename T>
int crossentropy_softmax(T *logits, float *losses, const int *targets, size_t N, int V,
			 cudaStream_t s);

/* adamw.cu: master (fp32) when T is bf16, NULL when params are the fp32 master */
template <typename T>
int adamw_update(T *params, float *master, const T *grads, float *m, float *v, size_t n,
		 float lr, float beta1, float beta2, float eps, float weight_decay, int t,
		 cudaStream_t s);

#endif
