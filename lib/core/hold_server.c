/* hold_server.c - srun's end of the hold channel (hold.h): it listens, takes each task's
 * hello with its proof, and answers every task of the step with the decision or a refusal.
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
	if ((rc = ab_hold_draw_token(s->client_token)) < 0 || (rc = ab_hold_draw_token(s->server_token)) < 0)
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

unsigned ab_hold_wait_s(unsigned probe_timeout, bool eval)
{
	unsigned p = probe_timeout < AB_TIMEOUT_MAX ? probe_timeout : AB_TIMEOUT_MAX;

	return p + 60 + p * (eval ? 2 : 1) + 600;
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
	if (n < 3 || n > 4 || !ab_hold_token_shaped(f[0], strlen(f[0])) ||
	    strlen(f[n - 1]) != AB_HOLD_PROOF_HEX ||
	    ab_parse_whole(f[1], 0, (long)s->expected - 1, &v) < 0 ||
	    (n == 4 && !ab_hold_node_ok(f[2], strlen(f[2]))) ||
	    !ab_hold_proof_equal(f[n - 1], s->client_token, "task", f[0], (unsigned)v))
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
	return ab_hold_send_all(fd, v, len, ab_now() + PER_CONN_S) == 0;
}

/* srun's proof, which answers the task's nonce, and a word: WAIT, LATER, or the verdict. */
static bool say(const struct ab_hold_server *s, const struct ab_hold_conn *c, const char *what,
		size_t len)
{
	char head[sizeof(MAGIC) + AB_HOLD_PROOF_HEX + 2], proof[AB_HOLD_PROOF_HEX + 1];

	if (ab_hold_proof(s->server_token, "srun", c->nonce, c->task, proof) < 0)
		return false;
	snprintf(head, sizeof(head), MAGIC "%s\n", proof);
	return ab_hold_send_all(c->fd, head, strlen(head), ab_now() + PER_CONN_S) == 0 &&
	       ab_hold_send_all(c->fd, what, len, ab_now() + PER_CONN_S) == 0;
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
