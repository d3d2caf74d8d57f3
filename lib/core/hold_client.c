/* hold_client.c - a task's end of the hold channel (hold.h): it parses srun's ticket,
 * connects back, proves it holds the step's token and waits for the decision.
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
	    !ab_hold_token_shaped(f[3], strlen(f[3])) || !ab_hold_token_shaped(f[4], strlen(f[4])))
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
	rc = errno == EINPROGRESS ? ab_hold_wait_fd(fd, POLLOUT, until) : -errno;
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
	return ab_hold_proof_equal(text + m, t->server_token, "srun", nonce, t->task) ? 0 : -EACCES;
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
	bool named = ab_hold_node_ok(t->node, strlen(t->node)); /* else srun would refuse the hello */
	int rc;

	if ((rc = ab_hold_draw_token(nonce)) < 0 ||
	    (rc = ab_hold_proof(t->client_token, "task", nonce, t->task, proof)) < 0)
		return rc;
	snprintf(hello, sizeof(hello), MAGIC "%s %u%s%s %s\n", nonce, t->task, named ? " " : "",
		 named ? t->node : "", proof);
	return ab_hold_send_all(fd, hello, strlen(hello), until);
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
		rc = ab_hold_recv_some(fd, reply, REPLY_MAX, &len, first_until < until ? first_until : until);
		if (rc == 0 && strchr(reply, '\n')) {
			if (!strcmp(reply, MAGIC "REFUSED\n")) {
				close(fd);
				return -EPIPE; /* srun read our hello and refused it */
			}
			if ((rc = check_server(reply, t, nonce)) == 0)
				body = strchr(reply, '\n') + 1;
		}
	}
	while (rc == 0 && strcmp(body, "LATER\n") != 0 && !ab_hold_ends_with(reply, len, "\nEND\n"))
		rc = ab_hold_recv_some(fd, reply, REPLY_MAX, &len, until);
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
