/* hold.c - the hold channel (hold.h): srun listens and answers; each task of the step,
 * launched before the decision, connects back and waits for it.
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
#include "hostlist.h"
#include "number.h"
#include "protocol.h"
#include "siphash.h"

#define MAGIC "AUTOBATCH-HOLD 2 "
#define HELLO_MAX 192
#define REPLY_MAX (AB_HOLD_VARS_MAX * (AB_HOLD_NAME_MAX + AB_HOLD_VALUE_MAX + 2) + 2 * AB_ERR_MAX)
#define PER_CONN_S 2.0   /* a task's hello arrives with its connection; no task stalls srun */
/* Connections that have not said hello yet: anyone may open them. A source keeps this many
 * (a node's tasks all starting at once), all sources this many; each pass accepts at most
 * this many new ones. */
#define PENDING_PER_SOURCE 64
#define PENDING_MAX 256
#define ACCEPTS_PER_PASS 64
#define RETRY_MS 200 /* a connection srun closed before its first line: soon again */
#define CONNECT_TRY_S 5.0
#define CONNECT_FOR_S 120.0 /* a task that cannot reach srun says so after this */
/* srun answers a hello at its next pass: between the probe's polls, while it waits for the
 * cache's lock, and while it serves; a minute of silence is not srun */
#define FIRST_LINE_S 60.0
#define WAIT_MAX_S 604800L  /* a week: beyond any probe_timeout */

/* the decision's variables (spank/srun_apply.c exports them) and their SLURM_ twins */
static const char *const hold_names[] = {
	AB_ENV_BATCH_SIZE, AB_ENV_GRAD_ACCUM,   AB_ENV_GLOBAL_BATCH, AB_ENV_EVAL_BATCH_SIZE,
	AB_ENV_FRACTION,   AB_ENV_DEVICE_BYTES, AB_ENV_REPORT,       AB_ENV_CONFIG,
	AB_ENV_WATCH,
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

static int draw_token(char *hex)
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

static bool token_shaped(const char *s, size_t len)
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

	if (!token_shaped(token, strlen(token)))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (unsigned char)(nibble(token[2 * i]) << 4 | nibble(token[2 * i + 1]));
	len = snprintf(msg, sizeof(msg), "%s %s %u", role, nonce, task);
	snprintf(proof, AB_HOLD_PROOF_HEX + 1, "%016llx",
		 (unsigned long long)ab_siphash24(key, msg, (size_t)len));
	return 0;
}

/* Whether text starts with the proof the holder of token gives; its time tells nothing of
 * how much of a guess was right. */
static bool proof_equal(const char *text, const char *token, const char *role,
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

/* ---- bytes on a socket, with deadlines ---- */

static int wait_fd(int fd, short events, double until)
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

static int send_all(int fd, const char *buf, size_t len, double until)
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
		if ((rc = wait_fd(fd, POLLOUT, until)) < 0)
			return rc;
	}
	return 0;
}

/* Reads what has come into buf at *len (NUL-terminated), waiting until `until` for some:
 * 0, -EPIPE at EOF, -EMSGSIZE when full, -ETIMEDOUT. */
static int recv_some(int fd, char *buf, size_t buflen, size_t *len, double until)
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
		if ((rc = wait_fd(fd, POLLIN, until)) < 0)
			return rc;
	}
}

static bool ends_with(const char *text, size_t len, const char *end)
{
	return len >= strlen(end) && !strcmp(text + len - strlen(end), end);
}

/* ---- srun ---- */

static int listen_on(int family, unsigned port)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	int fd, one = 1, zero = 0;

	if ((fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		/* one socket for both: IPv4 tasks arrive as mapped addresses */
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		a->sin6_family = AF_INET6, a->sin6_addr = in6addr_any;
		a->sin6_port = htons((unsigned short)port), sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET, a->sin_addr.s_addr = htonl(INADDR_ANY);
		a->sin_port = htons((unsigned short)port), sl = sizeof(*a);
	}
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, SOMAXCONN) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* IPv6 where the host has it, else IPv4 */
static int listen_any(unsigned port)
{
	int fd = listen_on(AF_INET6, port);

	return fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL ? listen_on(AF_INET, port) : fd;
}

static unsigned bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return 0;
	return ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
					: ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int ab_hold_listen(struct ab_hold_server *s, unsigned lo, unsigned hi, unsigned expected,
		   char *err, size_t errlen)
{
	unsigned n = lo ? hi - lo + 1 : 1, start = 0;
	struct rlimit rl;
	int rc, fd = -EADDRINUSE;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	if (lo && (hi < lo || hi > 65535))
		return ab_fail(err, errlen, EINVAL, "the port range %u-%u is not one", lo, hi);
	if ((rc = draw_token(s->client_token)) < 0 || (rc = draw_token(s->server_token)) < 0)
		return ab_fail(err, errlen, -rc, "no random bytes for the hold tokens: %s",
			       strerror(-rc));
	s->expected = expected ? expected : 1;
	if (!(s->seen = calloc(s->expected, 1)))
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	/* held connections are srun's descriptors: half of what is left, the rest told LATER */
	s->maxconns = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 256 && rl.rlim_cur != RLIM_INFINITY
			      ? (size_t)(rl.rlim_cur - 128) / 2
			      : 64;
	/* sruns started together spread over the range; from a draw of its own, so that the
	 * port tells nothing of a token */
	if (lo && getrandom(&start, sizeof(start), 0) != (ssize_t)sizeof(start))
		start = (unsigned)getpid();
	for (unsigned i = 0; i < n && fd == -EADDRINUSE; i++)
		fd = listen_any(lo ? lo + (start + i) % n : 0);
	if (fd < 0) {
		free(s->seen);
		s->seen = NULL;
		return ab_fail(err, errlen, -fd, "cannot listen for the step's tasks%s: %s",
			       lo ? " in SrunPortRange" : "", strerror(-fd));
	}
	s->fd = fd;
	s->port = bound_port(fd);
	return 0;
}

int ab_hold_ticket_format(const struct ab_hold_server *s, unsigned wait_s, char *buf,
			  size_t buflen)
{
	return ab_format(buf, buflen, "2:%u:%u:%s:%s", s->port, wait_s, s->client_token,
			 s->server_token);
}

static size_t format_verdict(const struct ab_hold_answer *a, char *buf, size_t buflen)
{
	static const char *const verdicts[] = {"DECIDED", "CONTINUE ", "ABORT "};
	char msg[AB_ERR_MAX];
	size_t len = 0;

	ab_append(buf, buflen, &len, "%s%s\n", verdicts[a->verdict],
		  a->verdict == AB_HOLD_DECIDED ? "" : ab_printable(a->message, msg, sizeof(msg)));
	for (size_t i = 0; a->verdict == AB_HOLD_DECIDED && i < a->nvars; i++)
		ab_append(buf, buflen, &len, "%s=%s\n", a->vars[i].name, a->vars[i].value);
	ab_append(buf, buflen, &len, "END\n");
	return len;
}

/* a node name srun can show as it is, and that fits a connection's record */
static bool node_ok(const char *s, size_t len)
{
	return len < AB_HOLD_NODE_MAX && ab_hostname_ok(s, len);
}

/* "AUTOBATCH-HOLD 2 <nonce> <task>[ <node>] <proof>\n": a task of this step, whose proof
 * says it holds the client token */
static bool hello_ok(const struct ab_hold_server *s, struct ab_hold_conn *c)
{
	char line[HELLO_MAX], *f[5], *save = NULL;
	size_t m = strlen(MAGIC), n = 0;
	long v;

	if (strncmp(c->hello, MAGIC, m) != 0)
		return false;
	snprintf(line, sizeof(line), "%.*s", (int)strcspn(c->hello + m, "\n"), c->hello + m);
	for (char *w = strtok_r(line, " ", &save); w && n < 5; w = strtok_r(NULL, " ", &save))
		f[n++] = w;
	if (n < 3 || n > 4 || !token_shaped(f[0], strlen(f[0])) ||
	    strlen(f[n - 1]) != AB_HOLD_PROOF_HEX ||
	    ab_parse_whole(f[1], 0, (long)s->expected - 1, &v) < 0 ||
	    (n == 4 && !node_ok(f[2], strlen(f[2]))) ||
	    !proof_equal(f[n - 1], s->client_token, "task", f[0], (unsigned)v))
		return false;
	memcpy(c->nonce, f[0], sizeof(c->nonce));
	snprintf(c->node, sizeof(c->node), "%s", n == 4 ? f[2] : "");
	c->task = (unsigned)v;
	return true;
}

/* Whether two peers are one host (the address, not the port). */
static bool same_source(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
	return false;
}

static void drop(struct ab_hold_server *s, size_t i)
{
	s->nheld -= s->conns[i].held;
	close(s->conns[i].fd);
	s->conns[i] = s->conns[--s->nconns];
}

/* A connection's hello, as far as it has come: 1 complete (and ours), 0 not yet, -1 gone or
 * too long, -2 complete and not ours. */
static int read_hello(const struct ab_hold_server *s, struct ab_hold_conn *c)
{
	ssize_t n = recv(c->fd, c->hello + c->len, sizeof(c->hello) - 1 - c->len, MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		return -1;
	if (n > 0)
		c->len += (size_t)n;
	c->hello[c->len] = '\0';
	if (!memchr(c->hello, '\n', c->len))
		return c->len + 1 >= sizeof(c->hello) ? -1 : 0;
	return hello_ok(s, c) ? 1 : -2;
}

/* To a hello that is not this step's (a stale ticket, another task id): one line, so that
 * the task fails at once; a connection closed without it may be a flood's casualty, which
 * tries again. Best effort: the connection is dropped either way. */
static void refuse(int fd)
{
	static const char line[] = MAGIC "REFUSED\n";

	(void)!send(fd, line, sizeof(line) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* To a held task, which has had srun's proof already: the verdict. */
static bool say_verdict(int fd, const char *v, size_t len)
{
	return send_all(fd, v, len, ab_now() + PER_CONN_S) == 0;
}

/* srun's proof, which answers the task's nonce, and a word: WAIT, LATER, or the verdict. */
static bool say(const struct ab_hold_server *s, const struct ab_hold_conn *c, const char *what,
		size_t len)
{
	char head[sizeof(MAGIC) + AB_HOLD_PROOF_HEX + 2], proof[AB_HOLD_PROOF_HEX + 1];

	if (ab_hold_proof(s->server_token, "srun", c->nonce, c->task, proof) < 0)
		return false;
	snprintf(head, sizeof(head), MAGIC "%s\n", proof);
	return send_all(c->fd, head, strlen(head), ab_now() + PER_CONN_S) == 0 &&
	       send_all(c->fd, what, len, ab_now() + PER_CONN_S) == 0;
}

/* Room for one more connection, 64 at a time. */
static int grow(struct ab_hold_server *s)
{
	struct ab_hold_conn *more;

	if (s->nconns % 64 != 0)
		return 0;
	if (!(more = realloc(s->conns, (s->nconns + 64) * sizeof(*more))))
		return -ENOMEM;
	s->conns = more;
	return 0;
}

/* A node that dies without a word (power, network) leaves its held connection open: TCP
 * keepalive ends it after about 15 + 4 x 5 s of silence, so srun hears of it while probing. */
static void keep_alive(int fd)
{
	int on = 1, idle = 15, intvl = 5, cnt = 4;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* A held task says nothing more until its verdict: a readable end or an error means it is
 * gone. */
static bool held_gone(const struct ab_hold_conn *c)
{
	char b;
	ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void lost(struct ab_hold_server *s, const struct ab_hold_conn *c)
{
	if (!s->nlost++) {
		s->lost_task = c->task;
		snprintf(s->lost_node, sizeof(s->lost_node), "%s", c->node);
	}
}

/* The oldest connection that has not said hello, of one source (from NULL: of any); the
 * index, or nconns when there is none. */
static size_t oldest_silent(const struct ab_hold_server *s, const struct sockaddr_storage *from,
			    size_t *count)
{
	size_t oldest = s->nconns;

	*count = 0;
	for (size_t i = 0; i < s->nconns; i++) {
		const struct ab_hold_conn *c = &s->conns[i];

		if (c->held || (from && !same_source(&c->peer, from)))
			continue;
		++*count;
		if (oldest == s->nconns || c->since < s->conns[oldest].since)
			oldest = i;
	}
	return oldest;
}

/* Makes room for a connection from `from`: a source may keep PENDING_PER_SOURCE silent
 * connections and all sources together PENDING_MAX (at most what srun may hold); beyond,
 * the oldest silent one goes, never a held task's. A flood of idle connections then pushes
 * out its own, and a task's, whose hello comes with its connection, is read in the pass
 * that accepts it (or retries, see ab_hold_wait). */
static void room_for(struct ab_hold_server *s, const struct sockaddr_storage *from)
{
	size_t max = s->maxconns < PENDING_MAX ? s->maxconns : PENDING_MAX, n, i;

	if ((i = oldest_silent(s, from, &n)) < s->nconns && n >= PENDING_PER_SOURCE)
		drop(s, i);
	if ((i = oldest_silent(s, NULL, &n)) < s->nconns && n >= max)
		drop(s, i);
}

/* New connections, at most ACCEPTS_PER_PASS a pass: the hellos of those accepted are read
 * before a flood can push them out. */
static void accept_new(struct ab_hold_server *s)
{
	for (int k = 0; k < ACCEPTS_PER_PASS; k++) {
		struct sockaddr_storage from;
		socklen_t len = sizeof(from);
		int c = accept4(s->fd, (struct sockaddr *)&from, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (c < 0)
			break;
		room_for(s, &from);
		if (grow(s) < 0) {
			close(c);
			continue;
		}
		keep_alive(c);
		s->conns[s->nconns++] = (struct ab_hold_conn){.fd = c, .since = ab_now(), .peer = from};
	}
}

/* One pass over what the tasks said: new connections, hellos. With a verdict (v, len), a
 * task that says hello gets it at once; else it is told to wait, or LATER when srun holds as
 * many connections as it may. */
static void take_hellos(struct ab_hold_server *s, const char *v, size_t len)
{
	accept_new(s);
	for (size_t i = 0; i < s->nconns;) {
		struct ab_hold_conn *c = &s->conns[i];
		int r;

		if (c->held && !v && held_gone(c)) {
			lost(s, c);
			drop(s, i);
			continue;
		}
		if (c->held || (r = read_hello(s, c)) == 0) {
			if (!c->held && ab_now() - c->since > PER_CONN_S)
				drop(s, i);
			else
				i++;
			continue;
		}
		if (r < 0) {
			if (r == -2)
				refuse(c->fd);
			drop(s, i);
			continue;
		}
		if (!s->seen[c->task]) /* a task told LATER comes back: it is counted once */
			s->nseen++, s->seen[c->task] = 1;
		if (v) {
			if (say(s, c, v, len) && s->seen[c->task] < 2)
				s->nanswered++, s->seen[c->task] = 2;
			drop(s, i);
		} else if (s->nheld < s->maxconns && say(s, c, "WAIT\n", 5)) {
			c->held = true;
			s->nheld++;
			i++;
		} else {
			say(s, c, "LATER\n", 6);
			drop(s, i);
		}
	}
}

unsigned ab_hold_gather(struct ab_hold_server *s)
{
	if (s->fd >= 0)
		take_hellos(s, NULL, 0);
	return s->nseen;
}

unsigned ab_hold_serve(struct ab_hold_server *s, const struct ab_hold_answer *a, double serve_s,
		       const volatile sig_atomic_t *stop)
{
	char *v = malloc(REPLY_MAX);
	size_t len = v ? format_verdict(a, v, REPLY_MAX) : 0;
	double end = ab_now() + serve_s;

	if (!v || s->fd < 0) {
		free(v);
		return s->nanswered;
	}
	for (size_t i = 0; i < s->nconns;) { /* those held get it now */
		struct ab_hold_conn *c = &s->conns[i];

		if (!c->held) {
			i++;
			continue;
		}
		if (say_verdict(c->fd, v, len) && s->seen[c->task] < 2)
			s->nanswered++, s->seen[c->task] = 2;
		drop(s, i);
	}
	while (s->nanswered < s->expected && ab_now() < end && !(stop && *stop)) {
		struct pollfd p = {.fd = s->fd, .events = POLLIN};

		take_hellos(s, v, len);
		if (s->nanswered < s->expected)
			poll(&p, 1, s->nconns ? 20 : 200);
	}
	free(v);
	return s->nanswered;
}

void ab_hold_close(struct ab_hold_server *s)
{
	while (s->nconns)
		drop(s, s->nconns - 1);
	free(s->conns);
	s->conns = NULL;
	free(s->seen);
	s->seen = NULL;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

/* ---- a task ---- */

/* one field of the ticket, up to the next ':' (or the end when last) */
static const char *field(const char *p, char *buf, size_t buflen, bool last)
{
	const char *end = last ? p + strlen(p) : strchr(p, ':');

	if (!end || (size_t)(end - p) >= buflen)
		return NULL;
	memcpy(buf, p, (size_t)(end - p));
	buf[end - p] = '\0';
	return last ? end : end + 1;
}

int ab_hold_ticket_parse(const char *value, struct ab_hold_ticket *t, char *err, size_t errlen)
{
	char f[5][AB_HOLD_TOKEN_HEX + 2];
	const char *p = value;
	long port, wait_s;

	memset(t, 0, sizeof(*t));
	for (int i = 0; i < 5 && p; i++)
		p = field(p, f[i], sizeof(f[i]), i == 4);
	if (p && strcmp(f[0], "2") != 0 && ab_parse_whole(f[0], 1, 99, &port) == 0)
		return ab_fail(err, errlen, EPROTONOSUPPORT,
			       "srun speaks hold protocol %s and this node's autobatch 2: install "
			       "one autobatch version on the submit hosts and the nodes",
			       f[0]);
	if (!p || strcmp(f[0], "2") != 0 || ab_parse_whole(f[1], 1, 65535, &port) < 0 ||
	    ab_parse_whole(f[2], 1, WAIT_MAX_S, &wait_s) < 0 ||
	    !token_shaped(f[3], strlen(f[3])) || !token_shaped(f[4], strlen(f[4])))
		return ab_fail(err, errlen, EINVAL, "SLURM_AUTOBATCH_HOLD is not srun's ticket");
	t->port = (unsigned)port, t->wait_s = (unsigned)wait_s;
	memcpy(t->client_token, f[3], sizeof(t->client_token));
	memcpy(t->server_token, f[4], sizeof(t->server_token));
	t->first_line_s = FIRST_LINE_S, t->connect_for_s = CONNECT_FOR_S;
	return 0;
}

static int connect_once(const struct addrinfo *ai, double until)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			ai->ai_protocol), rc, soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	rc = errno == EINPROGRESS ? wait_fd(fd, POLLOUT, until) : -errno;
	if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr)
		rc = -soerr;
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

#define REFUSED_FOR_S 3.0 /* a port nobody listens on: srun is gone, or a firewall rejects */

/* Tries every address of host until one answers, again every second: a full listen queue
 * drops connections for a while (they time out); a refusal is final after a few seconds. */
static int connect_srun(const char *host, unsigned port, double until, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
	char service[8], shown[128];
	const char *why;
	int fd = -EHOSTUNREACH; /* no address: the host does not resolve */

	snprintf(service, sizeof(service), "%u", port);
	for (;;) {
		int gai = getaddrinfo(host, service, &hints, &res);

		if (gai == 0) {
			for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
				double t = ab_now() + CONNECT_TRY_S;

				fd = connect_once(ai, t < until ? t : until);
			}
			freeaddrinfo(res);
		}
		if (fd >= 0)
			return fd;
		if (fd == -ECONNREFUSED && ab_now() + REFUSED_FOR_S < until)
			until = ab_now() + REFUSED_FOR_S;
		if (ab_now() + 1.0 >= until)
			break;
		poll(NULL, 0, 1000);
	}
	ab_printable(host, shown, sizeof(shown));
	why = strerror(-fd);
	return ab_fail(err, errlen, ECONNREFUSED,
		       "cannot reach srun at %s port %u (%s): is a firewall between the compute "
		       "nodes and srun's host? Sites that filter set SrunPortRange, which "
		       "autobatch listens in",
		       shown, port, why);
}

static int parse_verdict(const char *line, struct ab_hold_answer *a)
{
	const char *msg = NULL;

	if (!strcmp(line, "DECIDED"))
		a->verdict = AB_HOLD_DECIDED;
	else if (!strncmp(line, "CONTINUE ", 9))
		a->verdict = AB_HOLD_CONTINUE, msg = line + 9;
	else if (!strncmp(line, "ABORT ", 6))
		a->verdict = AB_HOLD_ABORT, msg = line + 6;
	else
		return -EPROTO;
	if (msg)
		ab_printable(msg, a->message, sizeof(a->message));
	return 0;
}

/* srun's first line: its proof, checked as soon as it comes (a program that is not this
 * step's srun would otherwise keep the task waiting). */
static int check_server(const char *text, const struct ab_hold_ticket *t, const char *nonce)
{
	size_t m = strlen(MAGIC);

	if (strcspn(text, "\n") != m + AB_HOLD_PROOF_HEX || strncmp(text, MAGIC, m) != 0)
		return -EPROTO;
	return proof_equal(text + m, t->server_token, "srun", nonce, t->task) ? 0 : -EACCES;
}

/* What follows srun's first line: WAIT (the verdict follows), LATER (-EAGAIN: ask again
 * shortly) or the verdict, then its variables, then END. */
static int parse_answer(char *text, struct ab_hold_answer *a)
{
	char *save = NULL, *line = strtok_r(text, "\n", &save);
	int rc;

	memset(a, 0, sizeof(*a));
	if (line && !strcmp(line, "WAIT"))
		line = strtok_r(NULL, "\n", &save);
	if (line && !strcmp(line, "LATER"))
		return -EAGAIN;
	if (!line || (rc = parse_verdict(line, a)) < 0)
		return -EPROTO;
	while ((line = strtok_r(NULL, "\n", &save)) && strcmp(line, "END") != 0) {
		char *eq = strchr(line, '=');

		if (!eq || a->verdict != AB_HOLD_DECIDED)
			return -EPROTO;
		*eq = '\0';
		if ((rc = ab_hold_answer_add(a, line, eq + 1)) < 0)
			return rc == -E2BIG ? -EPROTO : rc;
	}
	return line ? 0 : -EPROTO;
}

/* Our hello: a fresh nonce, which srun's proof must answer, and our own proof. */
static int say_hello(int fd, const struct ab_hold_ticket *t, char *nonce, double until)
{
	char hello[HELLO_MAX], proof[AB_HOLD_PROOF_HEX + 1];
	bool named = node_ok(t->node, strlen(t->node)); /* else srun would refuse the hello */
	int rc;

	if ((rc = draw_token(nonce)) < 0 ||
	    (rc = ab_hold_proof(t->client_token, "task", nonce, t->task, proof)) < 0)
		return rc;
	snprintf(hello, sizeof(hello), MAGIC "%s %u%s%s %s\n", nonce, t->task, named ? " " : "",
		 named ? t->node : "", proof);
	return send_all(fd, hello, strlen(hello), until);
}

/* One connection: the hello, srun's proof, then its answer; -EAGAIN when srun says LATER,
 * -ENOTCONN when it closed before its first line, -ENODATA when it stayed silent. */
static int ask(const char *host, const struct ab_hold_ticket *t, double connect_until,
	       double until, char *reply, struct ab_hold_answer *a, char *err, size_t errlen)
{
	char nonce[AB_HOLD_TOKEN_HEX + 1], *body = NULL;
	double first_until = ab_now() + t->first_line_s;
	size_t len = 0;
	int fd, rc;

	if ((fd = connect_srun(host, t->port, connect_until, err, errlen)) < 0)
		return fd;
	rc = say_hello(fd, t, nonce, until);
	while (rc == 0 && !body) {
		rc = recv_some(fd, reply, REPLY_MAX, &len, first_until < until ? first_until : until);
		if (rc == 0 && strchr(reply, '\n')) {
			if (!strcmp(reply, MAGIC "REFUSED\n")) {
				close(fd);
				return -EPIPE; /* srun read our hello and refused it */
			}
			if ((rc = check_server(reply, t, nonce)) == 0)
				body = strchr(reply, '\n') + 1;
		}
	}
	while (rc == 0 && strcmp(body, "LATER\n") != 0 && !ends_with(reply, len, "\nEND\n"))
		rc = recv_some(fd, reply, REPLY_MAX, &len, until);
	close(fd);
	/* closed before srun's first line: anyone could have made room by flooding the port
	 * (srun drops the oldest silent connection), so this says nothing of srun yet; silent
	 * past first_line_s: what listens is not srun, or srun is stopped */
	if (!body && (rc == -EPIPE || rc == -ECONNRESET))
		return -ENOTCONN;
	if (!body && rc == -ETIMEDOUT && ab_now() < until)
		return -ENODATA;
	return rc < 0 ? rc : parse_answer(body, a);
}

int ab_hold_wait(const char *host, const struct ab_hold_ticket *t, struct ab_hold_answer *a,
		 char *err, size_t errlen)
{
	double until = ab_now() + t->wait_s;
	char *reply = malloc(REPLY_MAX);
	double closed_until = 0; /* the first connection unanswered, and connect_for_s */
	int rc = -EAGAIN, last = 0;

	if (!reply)
		return ab_fail(err, errlen, ENOMEM, "out of memory");
	while (rc == -EAGAIN && ab_now() + 1.0 < until) {
		double connect_until = ab_now() + t->connect_for_s;

		rc = ask(host, t, connect_until < until ? connect_until : until, until, reply, a, err,
			 errlen);
		if (rc == -EAGAIN) /* srun holds as many as it may: a little later */
			poll(NULL, 0, 2000);
		if (rc == -ENOTCONN || rc == -ENODATA) { /* again, for as long as a connect */
			if (!closed_until)
				closed_until = ab_now() + t->connect_for_s;
			last = rc;
			rc = ab_now() < closed_until ? -EAGAIN : last;
			if (rc == -EAGAIN)
				poll(NULL, 0, RETRY_MS + (int)(ab_now() * 1000) % RETRY_MS);
		}
	}
	free(reply);
	if (rc == -ECONNREFUSED)
		return rc; /* err says it */
	if (rc == -ETIMEDOUT || rc == -EAGAIN)
		return ab_fail(err, errlen, ETIMEDOUT, "srun did not answer within %u s",
			       t->wait_s);
	if (rc == -ENODATA)
		return ab_fail(err, errlen, ENOTCONN,
			       "nothing on port %u answered as this step's srun for %.0f s: srun is "
			       "stopped, or gone and another program holds its port",
			       t->port, t->first_line_s);
	if (rc == -EPIPE || rc == -ECONNRESET || rc == -ENOTCONN)
		return ab_fail(err, errlen, EPIPE, "srun ended the wait without a decision (%s)",
			       strerror(rc == -ENOTCONN ? EPIPE : -rc));
	if (rc == -EACCES)
		return ab_fail(err, errlen, EACCES, "the answer on port %u is not from this step's "
						    "srun (wrong proof of its token: another "
						    "program holds srun's port)",
			       t->port);
	if (rc < 0)
		return ab_fail(err, errlen, EPROTO, "srun's answer is malformed");
	return 0;
}
