/* model.c - proxy model dimensions, tensor sizes and analytic memory (see model.h). */
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "number.h"

#define DIM_MAX (1L << 20) /* any dimension; keeps every product below 2^63 */

struct field {
	const char *name;
	size_t offset;
	enum ab_role role;
};

static const struct field fields[] = {
	{"layers", offsetof(struct ab_model, layers), AB_ROLE_LAYERS},
	{"hidden", offsetof(struct ab_model, hidden), AB_ROLE_HIDDEN},
	{"heads", offsetof(struct ab_model, heads), AB_ROLE_HEADS},
	{"ffn", offsetof(struct ab_model, ffn), AB_ROLE_FFN},
	{"seq", offsetof(struct ab_model, seq), AB_ROLE_SEQ_LEN},
	{"vocab", offsetof(struct ab_model, vocab), AB_ROLE_VOCAB},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* Heads divide hidden, every dimension in range, sizes that cannot overflow. */
static int model_check(const struct ab_model *m, char *err, size_t errlen);

static const char *dtype_name(enum ab_dtype dtype)
{
	return dtype == AB_DTYPE_BF16 ? "bf16" : "fp32";
}

size_t ab_dtype_bytes(enum ab_dtype dtype)
{
	return dtype == AB_DTYPE_BF16 ? 2 : 4;
}

static long *field_of(struct ab_model *m, const struct field *f)
{
	return (long *)((char *)m + f->offset);
}

static int parse_dim(const char *name, const char *text, long *out, char *err, size_t errlen)
{
	char buf[48];
	long v;

	if (ab_parse_whole(text, 1, DIM_MAX, &v) < 0)
		return ab_fail(err, errlen, EINVAL, "model %s=%s: give a whole number from 1 to %ld",
			       name, ab_printable(text, buf, sizeof(buf)), DIM_MAX);
	*out = v;
	return 0;
}

/* Names of the dtype as frameworks write it: torch_dtype "bfloat16", NeMo precision
 * "bf16-mixed" or 16, MaxText "bfloat16", "float32", 32. */
static int parse_dtype(const char *text, enum ab_dtype *out, char *err, size_t errlen)
{
	static const char *const bf16[] = {"bf16", "bfloat16", "bf16-mixed", "16", "16-mixed",
					   "fp16", "float16", "half"};
	static const char *const fp32[] = {"fp32", "float32", "32", "32-true", "float"};
	char buf[48];

	for (size_t i = 0; i < sizeof(bf16) / sizeof(bf16[0]); i++)
		if (!strcmp(text, bf16[i]))
			return *out = AB_DTYPE_BF16, 0;
	for (size_t i = 0; i < sizeof(fp32) / sizeof(fp32[0]); i++)
		if (!strcmp(text, fp32[i]))
			return *out = AB_DTYPE_FP32, 0;
	return ab_fail(err, errlen, EINVAL, "model dtype '%s': use bf16 or fp32",
		       ab_printable(text, buf, sizeof(buf)));
}

static int parse_item(char *item, struct ab_model *m, char *err, size_t errlen)
{
	char *eq = strchr(item, '='), buf[48];

	if (!eq)
		return ab_fail(err, errlen, EINVAL, "model '%s': write NAME=VALUE",
			       ab_printable(item, buf, sizeof(buf)));
	*eq++ = '\0';
	for (size_t i = 0; i < NFIELDS; i++)
		if (!strcmp(item, fields[i].name))
			return parse_dim(item, eq, field_of(m, &fields[i]), err, errlen);
	if (!strcmp(item, "dtype"))
		return parse_dtype(eq, &m->dtype, err, errlen);
	if (!strcmp(item, "recompute") && (!strcmp(eq, "0") || !strcmp(eq, "1")))
		return m->recompute = *eq == '1', 0;
	return ab_fail(err, errlen, EINVAL, "model '%s': the fields are layers, hidden, heads, "
					    "ffn, seq, vocab, dtype=bf16|fp32, recompute=0|1",
		       ab_printable(item, buf, sizeof(buf)));
}

int ab_model_parse_fields(const char *spec, struct ab_model *m, char *err, size_t errlen)
{
	char buf[512], *item, *save = NULL;
	int rc;

	memset(m, 0, sizeof(*m));
	if (ab_copy(buf, sizeof(buf), spec) < 0)
		return ab_fail(err, errlen, EINVAL, "--model: the text is too long");
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save))
		if ((rc = parse_item(item, m, err, errlen)) < 0)
			return rc;
	return 0;
}

int ab_model_parse(const char *spec, struct ab_model *m, char *err, size_t errlen)
{
	int rc = ab_model_parse_fields(spec, m, err, errlen);

	if (rc < 0)
		return rc;
	if (!m->ffn && m->hidden)
		m->ffn = 4 * m->hidden;
	return model_check(m, err, errlen);
}

static int read_dim(const struct ab_config *cfg, int document, const char *key,
		    const struct field *f, long *out, char *err, size_t errlen)
{
	char value[64], why[AB_ERR_MAX];

	if (ab_config_get(cfg, key, document, value, sizeof(value), why, sizeof(why)) < 0)
		return ab_fail(err, errlen, ENOENT, "%s has no %s (%s): give it with --model %s=N",
			       cfg->name, key, f->name, f->name);
	return parse_dim(key, value, out, err, errlen);
}

int ab_model_from_config(const struct ab_config *cfg, int document, const struct ab_preset *p,
			 struct ab_model *m, char *err, size_t errlen)
{
	const char *dkey = p->keys[AB_ROLE_DTYPE];
	char value[64], why[AB_ERR_MAX];
	int rc;

	for (size_t i = 0; i < NFIELDS; i++) {
		long *dst = field_of(m, &fields[i]);
		const char *key = p->keys[fields[i].role];

		if (*dst)
			continue;
		if (fields[i].role == AB_ROLE_FFN &&
		    (!key || ab_config_get(cfg, key, document, value, sizeof(value), why,
					   sizeof(why)) < 0))
			continue; /* the frameworks' default, 4 * hidden, below */
		if (!key)
			return ab_fail(err, errlen, ENOENT,
				       "preset %s names no key for the model's %s: give it with "
				       "--model %s=N",
				       p->name, fields[i].name, fields[i].name);
		if ((rc = read_dim(cfg, document, key, &fields[i], dst, err, errlen)) < 0)
			return rc;
	}
	if (!m->ffn)
		m->ffn = 4 * m->hidden;
	if (dkey && ab_config_get(cfg, dkey, document, value, sizeof(value), why, sizeof(why)) == 0 &&
	    (rc = parse_dtype(value, &m->dtype, err, errlen)) < 0)
		return rc;
	return model_check(m, err, errlen);
}

static int model_check(const struct ab_model *m, char *err, size_t errlen)
{
	for (size_t i = 0; i < NFIELDS; i++) {
		long v = *field_of((struct ab_model *)m, &fields[i]);

		if (v < 1 || v > DIM_MAX)
			return ab_fail(err, errlen, EINVAL,
				       "the model's %s is %s: give --model %s=N (1 to %ld)",
				       fields[i].name, v ? "out of range" : "missing", fields[i].name,
				       DIM_MAX);
	}
	if (m->hidden % m->heads)
		return ab_fail(err, errlen, EINVAL, "the model's hidden size %ld is not a multiple "
						    "of its %ld heads",
			       m->hidden, m->heads);
	if ((double)m->layers * (double)m->hidden * (double)(m->hidden + m->ffn) > 1e13 ||
	    (double)m->vocab * (double)m->hidden > 1e12)
		return ab_fail(err, errlen, EINVAL, "the model is over 10^13 parameters: check its "
						    "dimensions");
	return 0;
}

static void layout_params(const struct ab_model *m, uint64_t *p)
{
	uint64_t L = (uint64_t)m->layers, C = (uint64_t)m->hidden, F = (uint64_t)m->ffn;

	p[AB_P_WTE] = (uint64_t)m->vocab * C;
	p[AB_P_WPE] = (uint64_t)m->seq * C;
	p[AB_P_LN1W] = p[AB_P_LN1B] = p[AB_P_LN2W] = p[AB_P_LN2B] = L * C;
	p[AB_P_QKVW] = L * 3 * C * C;
	p[AB_P_QKVB] = L * 3 * C;
	p[AB_P_ATTPROJW] = L * C * C;
	p[AB_P_ATTPROJB] = p[AB_P_FCPROJB] = L * C;
	p[AB_P_FCW] = p[AB_P_FCPROJW] = L * F * C;
	p[AB_P_FCB] = L * F;
	p[AB_P_LNFW] = p[AB_P_LNFB] = C;
}

/* Saved activations; per-layer ones are L deep, or 1 deep with recompute (AB_A_RESIDUAL3
 * always keeps all L layer outputs: they are the inputs recompute starts from). */
static void layout_acts(const struct ab_model *m, long batch, uint64_t *a, size_t *bytes)
{
	uint64_t B = (uint64_t)batch, T = (uint64_t)m->seq, C = (uint64_t)m->hidden,
		 F = (uint64_t)m->ffn, NH = (uint64_t)m->heads, L = (uint64_t)m->layers;
	uint64_t deep = m->recompute ? 1 : L, BT = B * T;
	size_t x = ab_dtype_bytes(m->dtype);

	a[AB_A_ENCODED] = BT * C;
	a[AB_A_LN1] = a[AB_A_ATTY] = a[AB_A_RESIDUAL2] = a[AB_A_LN2] = deep * BT * C;
	a[AB_A_LN1_STATS] = a[AB_A_LN2_STATS] = deep * 2 * BT;
	a[AB_A_QKVR] = deep * 3 * BT * C;
	a[AB_A_ATT] = deep * B * NH * T * T;
	a[AB_A_FCH] = a[AB_A_FCH_GELU] = deep * BT * F;
	a[AB_A_RESIDUAL3] = L * BT * C;
	a[AB_A_LNF] = BT * C;
	a[AB_A_LNF_STATS] = 2 * BT;
	a[AB_A_LOGITS] = BT * (uint64_t)m->vocab;
	a[AB_A_LOSSES] = BT;
	for (int i = 0; i < AB_A_COUNT; i++)
		bytes[i] = x;
	bytes[AB_A_LN1_STATS] = bytes[AB_A_LN2_STATS] = bytes[AB_A_LNF_STATS] = 4;
	bytes[AB_A_LOSSES] = 4;
}

void ab_model_layout(const struct ab_model *m, long batch, struct ab_model_layout *out)
{
	uint64_t B = (uint64_t)batch, T = (uint64_t)m->seq, C = (uint64_t)m->hidden,
		 F = (uint64_t)m->ffn, NH = (uint64_t)m->heads, BT = B * T;
	uint64_t wide = 3 * C > F ? 3 * C : F;
	size_t x = ab_dtype_bytes(m->dtype);

	memset(out, 0, sizeof(*out));
	layout_params(m, out->param_elems);
	for (int i = 0; i < AB_P_COUNT; i++)
		out->nparams += out->param_elems[i];
	layout_acts(m, batch, out->act_elems, out->act_bytes_per_elem);
	out->params_bytes = out->grads_bytes = out->nparams * x;
	out->master_bytes = m->dtype == AB_DTYPE_BF16 ? out->nparams * 4 : 0;
	out->optimizer_bytes = out->nparams * 8;
	for (int i = 0; i < AB_A_COUNT; i++)
		out->acts_bytes += out->act_elems[i] * out->act_bytes_per_elem[i];
	/* backward: dresidual (BTC), two wide buffers (BT * max(3C, F)) and d(att) (B NH T T);
	 * the attention's pre-softmax scores share d(att)'s buffer in the forward */
	out->scratch_bytes = (BT * C + 2 * BT * wide + B * NH * T * T) * x;
	out->workspace_bytes = AB_CUBLAS_WORKSPACE;
	out->total_bytes = out->params_bytes + out->grads_bytes + out->master_bytes +
			   out->optimizer_bytes + out->acts_bytes + out->scratch_bytes +
			   out->workspace_bytes;
}

uint64_t ab_model_analytic_bytes(const struct ab_model *m, long batch)
{
	double s = (double)m->seq, b = (double)batch, h = (double)m->hidden,
	       F = (double)m->ffn, a = (double)m->heads, L = (double)m->layers;
	double x = (double)ab_dtype_bytes(m->dtype) / 2; /* the paper counts 2-byte values */
	double nparams = (double)ab_model_params(m);
	/* eq. 2 without dropout: attention 10sbh + 2as^2b, MLP 2sbh + 4sbF, layernorms 4sbh */
	double layer = x * (s * b * h * 16 + 4 * s * b * F + 2 * a * s * s * b);
	double acts = m->recompute ? L * x * 2 * s * b * h + layer : L * layer;
	/* what the paper's count of stored activations leaves out: embedding output, final
	 * layernorm, logits, and the backward's d(attention) of one layer (2as^2b) */
	double outside = x * 2 * s * b * (2 * h + (double)m->vocab) + x * 2 * a * s * s * b;

	return (uint64_t)(16 * nparams + acts + outside);
}

bool ab_model_sizeable(const struct ab_model *m, long batch)
{
	double B = (double)batch, T = (double)m->seq, C = (double)m->hidden, F = (double)m->ffn;
	double wide = 3 * C > F ? 3 * C : F;
	/* the largest terms, in bytes at 4 per element, each far below 2^62 */
	double terms[] = {B * (double)m->heads * T * T * (double)m->layers,
			  B * T * (double)m->vocab, B * T * wide * (double)m->layers,
			  16.0 * (double)ab_model_params(m)};

	if (batch < 1)
		return false;
	for (size_t i = 0; i < sizeof(terms) / sizeof(terms[0]); i++)
		if (4 * terms[i] > 0x1p58)
			return false;
	return true;
}

float ab_param_init(const struct ab_model *m, enum ab_param p, float *constant)
{
	float uniform = 0.02f * 1.7320508f; /* uniform in [-a, a) has std a / sqrt(3) */

	*constant = p == AB_P_LN1W || p == AB_P_LN2W || p == AB_P_LNFW ? 1.0f : 0.0f;
	if (p == AB_P_ATTPROJW || p == AB_P_FCPROJW)
		return uniform / sqrtf(2.0f * (float)m->layers);
	if (p == AB_P_WTE || p == AB_P_WPE || p == AB_P_QKVW || p == AB_P_FCW)
		return uniform;
	return 0.0f;
}

uint64_t ab_model_params(const struct ab_model *m)
{
	uint64_t p[AB_P_COUNT], n = 0;

	layout_params(m, p);
	for (int i = 0; i < AB_P_COUNT; i++)
		n += p[i];
	return n;
}

double ab_model_flops(const struct ab_model *m, long batch)
{
	double T = (double)m->seq, C = (double)m->hidden, F = (double)m->ffn,
	       V = (double)m->vocab, L = (double)m->layers;
	double per_token = L * (2 * (4 * C * C + 2 * F * C) + 4 * T * C) + 2 * C * V;

	return 3 * (double)batch * T * per_token;
}

void ab_model_describe(const struct ab_model *m, char *buf, size_t buflen)
{
	snprintf(buf, buflen,
		 "%ld layers, hidden %ld, %ld heads, ffn %ld, seq %ld, vocab %ld, %s%s, %.1fM params",
		 m->layers, m->hidden, m->heads, m->ffn, m->seq, m->vocab, dtype_name(m->dtype),
		 m->recompute ? ", recompute" : "", (double)ab_model_params(m) / 1e6);
}
