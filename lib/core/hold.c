/* hold.c - the hold channel (hold.h): the decision's variables a ticket may carry, and what
 * both ends share (hold_wire.h): tokens and proofs, bytes on a socket with deadlines. srun's
 * end is hold_server.c, a task's hold_client.c. Only the plugin links the channel; it is in
 * lib/core because it stands without Slurm, and tests/unit/test_hold runs both ends here.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include "clock.h"
#include "hold.h"
#include "hold_wire.h"
#include "hostlist.h"
#include "number.h"
#include "protocol.h"
#include "siphash.h"

/* the decision's variables (spank/srun_apply.c exports them) and their SLURM_ twins */
static const char *const hold_names[] = {
	AB_ENV_BATCH_SIZE, AB_ENV_GRAD_ACCUM,   AB_ENV_GLOBAL_BATCH, AB_ENV_EVAL_BATCH_SIZE,
	AB_ENV_FRACTION,   AB_ENV_DEVICE_BYTES, AB_ENV_REPORT,       AB_ENV_CONFIG,
	AB_ENV_WATCH,	   AB_ENV_XLA_MEM_FRACTION, AB_ENV_XLA_CLIENT_MEM_FRACTION,
	AB_ENV_XLA_PREALLOCATE,
};

bool ab_hold_name_ok(const char *name)
{
	const char *base = strncmp(name, "SLURM_", 6) == 0 ? name + 6 : name;

	for (size_t i = 0; i < sizeof(hold_names) / sizeof(hold_names[0]); i++)
		if (strcmp(base, hold_names[i]) == 0)
			return true;
	return false;
}

static bool printable_line(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

int ab_hold_answer_add(struct ab_hold_answer *a, const char *name, const char *value)
{
	struct ab_hold_var *v;

	if (!ab_hold_name_ok(name) || !printable_line(value))
		return -EINVAL;
	if (a->nvars >= AB_HOLD_VARS_MAX)
		return -E2BIG;
	v = &a->vars[a->nvars];
	if (ab_copy(v->name, sizeof(v->name), name) < 0 ||
	    ab_copy(v->value, sizeof(v->value), value) < 0)
		return -E2BIG;
	a->nvars++;
	return 0;
}

/* ---- tokens ---- */

int ab_hold_draw_token(char *hex)
{
	unsigned char raw[AB_HOLD_TOKEN_HEX / 2];
	size_t got = 0;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

static bool hex_shaped(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!s[i] || !strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

bool ab_hold_token_shaped(const char *s, size_t len)
{
	return len == AB_HOLD_TOKEN_HEX && hex_shaped(s, len);
}

static unsigned nibble(char c)
{
	return c <= '9' ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10);
}

int ab_hold_proof(const char *token, const char *role, const char *nonce, unsigned task,
		  char *proof)
{
	unsigned char key[AB_HOLD_TOKEN_HEX / 2];
	char msg[2 * AB_HOLD_TOKEN_HEX];
	int len;

	if (!ab_hold_token_shaped(token, strlen(token)))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (unsigned char)(nibble(token[2 * i]) << 4 | nibble(token[2 * i + 1]));
	len = snprintf(msg, sizeof(msg), "%s %s %u", role, nonce, task);
	if (len < 0 || (size_t)len >= sizeof(msg)) /* a nonce not of the channel's shape */
		return -EINVAL;
	snprintf(proof, AB_HOLD_PROOF_HEX + 1, "%016llx",
		 (unsigned long long)ab_siphash24(key, msg, (size_t)len));
	return 0;
}

bool ab_hold_proof_equal(const char *text, const char *token, const char *role,
			const char *nonce, unsigned task)
{
	char want[AB_HOLD_PROOF_HEX + 1];
	unsigned char diff = 0;

	if (ab_hold_proof(token, role, nonce, task, want) < 0 || !hex_shaped(text, AB_HOLD_PROOF_HEX))
		return false;
	for (size_t i = 0; i < AB_HOLD_PROOF_HEX; i++)
		diff |= (unsigned char)(text[i] ^ want[i]);
	return diff == 0;
}

bool ab_hold_node_ok(const char *s, size_t len)
{
	return len < AB_HOLD_NODE_MAX && ab_hostname_ok(s, len);
}

/* ---- bytes on a socket, with deadlines ---- */

int ab_hold_wait_fd(int fd, short events, double until)
{
	for (;;) {
		double left = until - ab_now();
		struct pollfd p = {.fd = fd, .events = events};
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)(left * 1000.0) + 1);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

int ab_hold_send_all(int fd, const char *buf, size_t len, double until)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		int rc;

		if (n > 0) {
			buf += n, len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if ((rc = ab_hold_wait_fd(fd, POLLOUT, until)) < 0)
			return rc;
	}
	return 0;
}

int ab_hold_recv_some(int fd, char *buf, size_t buflen, size_t *len, double until)
{
	for (;;) {
		ssize_t n;
		int rc;

		if (*len + 1 >= buflen)
			return -EMSGSIZE;
		n = recv(fd, buf + *len, buflen - 1 - *len, MSG_DONTWAIT);
		if (n > 0) {
			*len += (size_t)n;
			buf[*len] = '\0';
			return 0;
		}
		if (n == 0)
			return -EPIPE;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if ((rc = ab_hold_wait_fd(fd, POLLIN, until)) < 0)
			return rc;
	}
}

bool ab_hold_ends_with(const char *text, size_t len, const char *end)
{
	return len >= strlen(end) && !strcmp(text + len - strlen(end), end);
}
