/* adamw.cu - the AdamW update: fp32 moments, fp32 master weights, the bf16 copy rewritten
 * from the master (with fp32 storage the parameters are the master).
 */
#include "layers.cuh"

/* ---- kernels ------------------------------------------------------------------------ */

template <typename T>
__global__ void adamw_kernel(T *params, float *master, const T *grads, float *m, float *v,
			     size_t n, float lr, float b1, float b2, float eps, float wd, float c1,
			     float c2)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float g = to_f(grads[i]), mi = b1 * m[i] + (1 - b1) * g;
		float vi = b2 * v[i] + (1 - b2) * g * g;
		float p = master ? master[i] : to_f(params[i]);

		m[i] = mi;
		v[i] = vi;
		p -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * p);
		if (master)
			master[i] = p;
		params[i] = from_f<T>(p);
	}
}

/* ---- launchers ---------------------------------------------------------------------- */

template <typename T>
int adamw_update(T *params, float *master, const T *grads, float *m, float *v, size_t n,
		 float lr, float beta1, float beta2, float eps, float weight_decay, int t,
		 cudaStream_t s)
{
	float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);

	adamw_kernel<<<grid_for(n, 256), 256, 0, s>>>(params, master, grads, m, v, n, lr, beta1,
						      beta2, eps, weight_decay, c1, c2);
	LAUNCH_CHECK();
	return 0;
}

template int adamw_update<float>(float *, float *, const float *, float *, float *, size_t,
				 float, float, float, float, float, int, cudaStream_t);
template int adamw_update<bf16>(bf16 *, float *, const bf16 *, float *, float *, size_t, float,
				float, float, float, float, int, cudaStream_t);
