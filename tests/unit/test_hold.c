/* test_hold.c - the hold channel (lib/core/hold.c) over real TCP on the loopback: a task
 * gets srun's verdict and variables; srun gathers the tasks while it probes and counts each
 * once; wrong tokens and task ids, a srun that dies or never answers, a rogue answer and a
 * hostile ticket are refused; no token crosses the wire, and a program on srun's port that
 * cannot prove srun's token, or says nothing, does not keep a task waiting; fifty tasks are
 * answered; tasks beyond what srun may hold are told to come back later, and do; a port
 * range is kept; SipHash-2-4 gives its authors' test vectors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "unit.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "hold.h"
#include "input_limits.h"
#include "siphash.h"

static char err[AB_ERR_MAX];

/* A task in a child process: its result comes back through a pipe as "rc|verdict|message|
 * NAME=VALUE;..." so the parent can be srun meanwhile. */
struct task {
	pid_t pid;
	int fd;
};

/* srun's listening socket, which a task on another node does not hold: closed in the child */
static int srun_fd = -1;

static void start_task_on(struct task *t, const struct ab_hold_ticket *ticket, unsigned id,
			  const char *node)
{
	struct ab_hold_ticket mine = *ticket;
	int p[2];

	assert_int_equal(pipe(p), 0);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		struct ab_hold_answer a;
		char out[8192], e[AB_ERR_MAX] = "";
		int rc, len;

		if (srun_fd >= 0)
			close(srun_fd);
		mine.task = id;
		snprintf(mine.node, sizeof(mine.node), "%s", node);
		rc = ab_hold_wait("127.0.0.1", &mine, &a, e, sizeof(e));
		len = snprintf(out, sizeof(out), "%d|%d|%s|%s|", rc, rc == 0 ? (int)a.verdict : -1,
				   rc == 0 ? a.message : "", e);

		for (size_t i = 0; rc == 0 && i < a.nvars; i++)
			len += snprintf(out + len, sizeof(out) - (size_t)len, "%s=%s;", a.vars[i].name,
					a.vars[i].value);
		close(p[0]);
		if (write(p[1], out, (size_t)len) < 0)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	t->fd = p[0];
}

static void start_task(struct task *t, const struct ab_hold_ticket *ticket, unsigned id)
{
	start_task_on(t, ticket, id, "");
}

static void end_task(struct task *t, char *out, size_t outlen)
{
	ssize_t n, len = 0;
	int status;

	while ((n = read(t->fd, out + len, outlen - 1 - (size_t)len)) > 0)
		len += n;
	out[len] = '\0';
	close(t->fd);
	assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void ticket_of(const struct ab_hold_server *s, unsigned wait_s, struct ab_hold_ticket *t)
{
	char value[256];

	srun_fd = s->fd;
	assert_int_equal(ab_hold_ticket_format(s, wait_s, value, sizeof(value)), 0);
	assert_int_equal(ab_hold_ticket_parse(value, t, err, sizeof(err)), 0);
}

static void decided_answer(struct ab_hold_answer *a)
{
	memset(a, 0, sizeof(*a));
	a->verdict = AB_HOLD_DECIDED;
	assert_int_equal(ab_hold_answer_add(a, "AUTOBATCH_BATCH_SIZE", "96"), 0);
	assert_int_equal(ab_hold_answer_add(a, "SLURM_AUTOBATCH_BATCH_SIZE", "96"), 0);
	assert_int_equal(ab_hold_answer_add(a, "AUTOBATCH_CONFIG", "/home/u/exp 1/cfg.yaml"), 0);
}

/* gather until n tasks said hello, for at most 10 s */
static unsigned gather_until(struct ab_hold_server *s, unsigned n)
{
	double end = ab_now() + 10;

	while (ab_hold_gather(s) < n && ab_now() < end)
		usleep(20 * 1000);
	return s->nseen;
}

/* The tasks connect first and srun gathers them while it "probes" (each told to wait, each
 * counted once); then every one gets the verdict. */
static void decided_reaches_every_task(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct ab_hold_answer a;
	struct task tasks[3];
	char out[8192];

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 3, err, sizeof(err)), 0);
	assert_true(s.port > 0);
	ticket_of(&s, 30, &t);
	for (int i = 0; i < 3; i++)
		start_task(&tasks[i], &t, (unsigned)i);
	assert_int_equal(gather_until(&s, 3), 3);
	assert_int_equal(s.nheld, 3);
	usleep(300 * 1000);
	assert_int_equal(ab_hold_gather(&s), 3); /* nobody counted twice */
	decided_answer(&a);
	assert_int_equal(ab_hold_serve(&s, &a, 10.0, NULL), 3);
	for (int i = 0; i < 3; i++) {
		end_task(&tasks[i], out, sizeof(out));
		assert_string_equal(out, "0|0|||AUTOBATCH_BATCH_SIZE=96;SLURM_AUTOBATCH_BATCH_SIZE=96;"
					 "AUTOBATCH_CONFIG=/home/u/exp 1/cfg.yaml;");
	}
	ab_hold_close(&s);
}

static void continue_and_abort_carry_their_message(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct ab_hold_answer a = {.verdict = AB_HOLD_ABORT};
	struct task task;
	char out[8192];

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 1, err, sizeof(err)), 0);
	ticket_of(&s, 30, &t);
	snprintf(a.message, sizeof(a.message), "probing failed\nand on_failure=abort");
	start_task(&task, &t, 0);
	assert_int_equal(ab_hold_serve(&s, &a, 10.0, NULL), 1);
	end_task(&task, out, sizeof(out));
	/* a newline would end the line: it arrives as '?' */
	assert_string_equal(out, "0|2|probing failed?and on_failure=abort||");

	ab_hold_close(&s);

	/* a task that asks once srun has decided gets the verdict at once */
	assert_int_equal(ab_hold_listen(&s, 0, 0, 1, err, sizeof(err)), 0);
	ticket_of(&s, 30, &t);
	a = (struct ab_hold_answer){.verdict = AB_HOLD_CONTINUE};
	snprintf(a.message, sizeof(a.message), "original settings");
	start_task(&task, &t, 0);
	assert_int_equal(ab_hold_serve(&s, &a, 10.0, NULL), 1);
	end_task(&task, out, sizeof(out));
	assert_string_equal(out, "0|1|original settings||");
	ab_hold_close(&s);
}

/* A task with a wrong client token gets nothing; one expecting another server token refuses
 * the answer. */
static void wrong_tokens(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t, bad;
	struct ab_hold_answer a;
	struct task task;
	char out[8192];

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 2, err, sizeof(err)), 0);
	ticket_of(&s, 5, &t);
	decided_answer(&a);

	bad = t;
	bad.client_token[0] = bad.client_token[0] == 'a' ? 'b' : 'a';
	start_task(&task, &bad, 0);
	assert_int_equal(gather_until(&s, 1), 0); /* not counted */
	end_task(&task, out, sizeof(out));
	assert_contains(out, "srun ended the wait without a decision");
	assert_int_equal(atoi(out), -EPIPE);

	/* a task id outside the step is not one of its tasks */
	start_task(&task, &t, 2);
	assert_int_equal(gather_until(&s, 1), 0);
	end_task(&task, out, sizeof(out));
	assert_int_equal(atoi(out), -EPIPE);

	bad = t;
	bad.server_token[5] = bad.server_token[5] == 'a' ? 'b' : 'a';
	start_task(&task, &bad, 1);
	assert_int_equal(gather_until(&s, 1), 1); /* its hello was right: srun counts it */
	end_task(&task, out, sizeof(out)); /* srun's proof is wrong to it */
	assert_int_equal(atoi(out), -EACCES);
	assert_contains(out, "is not from this step's srun (wrong proof of its token");
	ab_hold_close(&s);
}

/* srun dies while its tasks wait: they are told at once, not at their deadline. */
static void srun_gone(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct task task;
	char out[8192];
	double t0;

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 2, err, sizeof(err)), 0);
	ticket_of(&s, 60, &t);
	start_task(&task, &t, 0);
	assert_int_equal(gather_until(&s, 1), 1); /* held, waiting */
	t0 = ab_now();
	ab_hold_close(&s);
	end_task(&task, out, sizeof(out));
	assert_true(ab_now() - t0 < 5);
	assert_int_equal(atoi(out), -EPIPE);

	/* and a task that starts after srun is gone says it cannot reach it */
	t.wait_s = 5;
	t0 = ab_now();
	start_task(&task, &t, 1);
	end_task(&task, out, sizeof(out));
	assert_int_equal(atoi(out), -ECONNREFUSED);
	assert_true(ab_now() - t0 < 5); /* refused is final after a few seconds */
	assert_contains(out, "cannot reach srun at 127.0.0.1 port");
	assert_contains(out, "SrunPortRange");
}

static void no_answer_in_time(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct task task;
	char out[8192];
	double t0 = ab_now();

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 1, err, sizeof(err)), 0);
	ticket_of(&s, 2, &t);
	start_task(&task, &t, 0);
	assert_int_equal(gather_until(&s, 1), 1);
	end_task(&task, out, sizeof(out));
	assert_true(ab_now() - t0 < 5);
	assert_int_equal(atoi(out), -ETIMEDOUT);
	assert_contains(out, "srun did not answer within 2 s");
	ab_hold_close(&s);
}

/* Whoever answers with the right server token still sets only the decision's variables. */
static void rogue_answer_sets_nothing_else(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct task task;
	char out[8192], reply[512], hello[192], proof[AB_HOLD_PROOF_HEX + 1];
	int c;

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 1, err, sizeof(err)), 0);
	ticket_of(&s, 10, &t);
	start_task(&task, &t, 0);
	{
		struct pollfd p = {.fd = s.fd, .events = POLLIN};

		assert_int_equal(poll(&p, 1, 10000), 1);
	}
	assert_true((c = accept(s.fd, NULL, NULL)) >= 0);
	assert_true(read(c, hello, sizeof(hello)) > 0);
	assert_int_equal(strncmp(hello, "AUTOBATCH-HOLD 2 ", 17), 0);
	hello[17 + AB_HOLD_TOKEN_HEX] = '\0'; /* the task's nonce */
	assert_int_equal(ab_hold_proof(s.server_token, "srun", hello + 17, 0, proof), 0);
	{ /* a nonce too long to prove over whole is refused, not hashed past its buffer */
		char nonce[80];

		memset(nonce, 'a', sizeof(nonce) - 1);
		nonce[sizeof(nonce) - 1] = '\0';
		assert_int_equal(ab_hold_proof(s.server_token, "srun", nonce, 0, reply), -EINVAL);
	}
	snprintf(reply, sizeof(reply), "AUTOBATCH-HOLD 2 %s\nDECIDED\nLD_PRELOAD=/tmp/x.so\nEND\n",
		 proof);
	assert_true(write(c, reply, strlen(reply)) > 0);
	close(c);
	end_task(&task, out, sizeof(out));
	assert_int_equal(atoi(out), -EPROTO);

	struct ab_hold_answer a = {0};
	assert_int_equal(ab_hold_answer_add(&a, "LD_PRELOAD", "/tmp/x.so"), -EINVAL);
	assert_int_equal(ab_hold_answer_add(&a, "AUTOBATCH_BATCH_SIZE", "9\nLD_PRELOAD=x"), -EINVAL);
	assert_int_equal(ab_hold_answer_add(&a, "XLA_FLAGS", "--xla_dump_to=/tmp"), -EINVAL);
	assert_int_equal(a.nvars, 0);
	/* XLA's pool cap, a decided step's where the user named none */
	assert_int_equal(ab_hold_answer_add(&a, "XLA_PYTHON_CLIENT_MEM_FRACTION", "0.8"), 0);
	assert_int_equal(ab_hold_answer_add(&a, "XLA_CLIENT_MEM_FRACTION", "0.8"), 0);
	assert_int_equal(a.nvars, 2);
	ab_hold_close(&s);
}

static void tickets(void **state)
{
	static const char *const bad[] = {
		"", "1", "x:80:10:0123456789abcdef0123456789abcdef:0123456789abcdef0123456789abcdef",
		"2:0:10:0123456789abcdef0123456789abcdef:0123456789abcdef0123456789abcdef",
		"2:70000:10:0123456789abcdef0123456789abcdef:0123456789abcdef0123456789abcdef",
		"2:80:0:0123456789abcdef0123456789abcdef:0123456789abcdef0123456789abcdef",
		"2:80:-1:0123456789abcdef0123456789abcdef:0123456789abcdef0123456789abcdef",
		"2:80:10:0123456789ABCDEF0123456789abcdef:0123456789abcdef0123456789abcdef",
		"2:80:10:0123456789abcdef0123456789abcde:0123456789abcdef0123456789abcdef",
		"2:80:10:0123456789abcdef0123456789abcdef:0123456789abcdef0123456789abcdef:x",
		"2:80:10:0123456789abcdef0123456789abcdef:0123456789abcdef0123456789abcdefa",
	};
	struct ab_hold_ticket t;

	(void)state;
	assert_int_equal(ab_hold_ticket_parse("2:80:10:0123456789abcdef0123456789abcdef:"
					      "fedcba9876543210fedcba9876543210",
					      &t, err, sizeof(err)),
			 0);
	assert_int_equal(t.port, 80);
	assert_int_equal(t.wait_s, 10);
	assert_string_equal(t.server_token, "fedcba9876543210fedcba9876543210");
	/* the wait srun gives at the largest probe_timeout a site may set, with the eval probe */
	{
		char longest[128];

		snprintf(longest, sizeof(longest), "2:80:%u:0123456789abcdef0123456789abcdef:"
			 "fedcba9876543210fedcba9876543210", ab_hold_wait_s(AB_TIMEOUT_MAX, true));
		assert_int_equal(ab_hold_ticket_parse(longest, &t, err, sizeof(err)), 0);
		assert_int_equal(t.wait_s, 3 * AB_TIMEOUT_MAX + 660);
		assert_int_equal(ab_hold_wait_s(900, false), 900 + 60 + 900 + 600);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ab_hold_ticket_parse(bad[i], &t, err, sizeof(err)) != -EINVAL)
			fail_msg("accepted the ticket '%s'", bad[i]);
	assert_contains(err, "SLURM_AUTOBATCH_HOLD is not srun's ticket");
	/* an srun of another autobatch: said so, with the fix */
	assert_int_equal(ab_hold_ticket_parse("1:80:10:0123456789abcdef0123456789abcdef:"
					      "fedcba9876543210fedcba9876543210",
					      &t, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	assert_contains(err, "srun speaks hold protocol 1 and this node's autobatch 2: install "
			     "one autobatch version");
}

/* SipHash-2-4 with the key 00 01 .. 0f, as its authors give it (the paper's appendix, and
 * the first two of the reference's vectors.h) */
static void siphash_vectors(void **state)
{
	unsigned char key[16], msg[15];

	(void)state;
	for (int i = 0; i < 16; i++)
		key[i] = (unsigned char)i;
	for (int i = 0; i < 15; i++)
		msg[i] = (unsigned char)i;
	assert_true(ab_siphash24(key, msg, 0) == 0x726fdb47dd0e0e31ULL);
	assert_true(ab_siphash24(key, msg, 1) == 0x74f839c593dc67fdULL);
	assert_true(ab_siphash24(key, msg, 15) == 0xa129ca6149be45e5ULL);
}

/* A listener that is not srun (srun died and another program took its port): it reads the
 * task's hello, which names neither token, and cannot answer its nonce. */
static void no_token_crosses_the_wire(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct task task;
	char out[8192], hello[192] = "", reply[256], proof[AB_HOLD_PROOF_HEX + 1];
	double t0;
	int c;

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 2, err, sizeof(err)), 0);
	ticket_of(&s, 600, &t);
	t0 = ab_now();
	start_task(&task, &t, 1);
	{
		struct pollfd p = {.fd = s.fd, .events = POLLIN};

		assert_int_equal(poll(&p, 1, 10000), 1);
	}
	assert_true((c = accept(s.fd, NULL, NULL)) >= 0);
	assert_true(read(c, hello, sizeof(hello) - 1) > 0);
	assert_null(strstr(hello, s.client_token));
	assert_null(strstr(hello, s.server_token));
	assert_int_equal(strncmp(hello, "AUTOBATCH-HOLD 2 ", 17), 0);
	/* the impostor's best: a proof under the client token, which it might have */
	hello[17 + AB_HOLD_TOKEN_HEX] = '\0';
	assert_int_equal(ab_hold_proof(s.client_token, "srun", hello + 17, 1, proof), 0);
	snprintf(reply, sizeof(reply), "AUTOBATCH-HOLD 2 %s\nDECIDED\nEND\n", proof);
	assert_true(write(c, reply, strlen(reply)) > 0);
	end_task(&task, out, sizeof(out));
	close(c);
	assert_int_equal(atoi(out), -EACCES);
	assert_true(ab_now() - t0 < 10); /* at once, not at the ticket's 600 s */

	/* and srun, asked by a client that knows no token, reveals none */
	{
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port)};
		const char *nonce = "00112233445566778899aabbccddeeff";
		char line[256];
		ssize_t n = 0;

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_true((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
		assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
		snprintf(line, sizeof(line), "AUTOBATCH-HOLD 2 %s 0 node1 0123456789abcdef\n", nonce);
		assert_true(write(c, line, strlen(line)) > 0);
		for (int i = 0; i < 200 && n <= 0; i++) {
			ab_hold_gather(&s);
			n = recv(c, reply, sizeof(reply) - 1, MSG_DONTWAIT);
			usleep(10 * 1000);
		}
		assert_true(n > 0);
		reply[n] = '\0';
		assert_string_equal(reply, "AUTOBATCH-HOLD 2 REFUSED\n");
		close(c);
		assert_int_equal(s.nseen, 0);
	}
	ab_hold_close(&s);
}

/* A listener that says nothing (a program on the port srun had): the task gives up after
 * first_line_s and connect_for_s, not at the ticket's end (it did, before). */
static void silent_listener_is_not_waited_for(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct task task;
	char out[8192], want[160];
	double t0;
	int other;

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 1, err, sizeof(err)), 0);
	ticket_of(&s, 600, &t);
	ab_hold_close(&s); /* srun is gone; another program listens, and reads nothing */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true((other = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(other, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(other, 16), 0);
	assert_int_equal(getsockname(other, (struct sockaddr *)&a, &alen), 0);
	t.port = ntohs(a.sin_port);
	t.first_line_s = 1, t.connect_for_s = 2;
	srun_fd = other;
	t0 = ab_now();
	start_task(&task, &t, 0); /* the kernel accepts its connections */
	end_task(&task, out, sizeof(out));
	assert_int_equal(atoi(out), -ENOTCONN);
	assert_true(ab_now() - t0 < 10);
	snprintf(want, sizeof(want), "nothing on port %u answered as this step's srun for 1 s",
		 t.port);
	assert_contains(out, want);
	close(other);
	srun_fd = -1;
}

/* n tasks gathered while srun "probes", srun holding at most maxconns (0: as it likes): the
 * others are told LATER, come back and are told again, each counted once; all are answered. */
static void gather_and_answer(unsigned n, size_t maxconns)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct ab_hold_answer a;
	static struct task tasks[64];
	char out[8192];

	assert_int_equal(ab_hold_listen(&s, 0, 0, n, err, sizeof(err)), 0);
	if (maxconns)
		s.maxconns = maxconns;
	ticket_of(&s, 30, &t);
	for (unsigned i = 0; i < n; i++)
		start_task(&tasks[i], &t, i);
	assert_int_equal(gather_until(&s, n), n);
	if (maxconns) {
		assert_int_equal(s.nheld, maxconns);
		sleep(3);
		assert_int_equal(ab_hold_gather(&s), n);
		assert_int_equal(s.nheld, maxconns);
	}
	decided_answer(&a);
	assert_int_equal(ab_hold_serve(&s, &a, 20.0, NULL), n);
	for (unsigned i = 0; i < n; i++) {
		end_task(&tasks[i], out, sizeof(out));
		assert_contains(out, "0|0|||AUTOBATCH_BATCH_SIZE=96;");
	}
	ab_hold_close(&s);
}

static void many_tasks_queued(void **state)
{
	(void)state;
	gather_and_answer(50, 0);
}

static void beyond_what_srun_holds(void **state)
{
	(void)state;
	gather_and_answer(5, 2);
}

/* Another user floods srun's port: FLOOD_CONNS connections held open without a word, each
 * opened again as soon as srun closes it, from a process of another uid (nobody, when the
 * tests run as root). Every task of the step still gets its decision. Before, a full table
 * closed each new connection at once, and a task took that for srun's end (issue 40: 250
 * idle connections made a task with a valid ticket fail). */
#define FLOOD_CONNS 1000

static int flood_connect(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The flooder: opens FLOOD_CONNS, says on ready once it has, keeps them open, reopens what
 * srun closes; until killed. */
static void flooder(unsigned port, int ready)
{
	static struct pollfd p[FLOOD_CONNS];
	struct rlimit rl;
	size_t opened = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < FLOOD_CONNS + 64) {
		rl.rlim_cur = rl.rlim_max < FLOOD_CONNS + 64 ? rl.rlim_max : FLOOD_CONNS + 64;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
		_exit(3);
	for (size_t i = 0; i < FLOOD_CONNS; i++) {
		p[i].fd = flood_connect(port);
		p[i].events = POLLIN;
		opened += p[i].fd >= 0;
	}
	if (write(ready, &opened, sizeof(opened)) < 0)
		_exit(2);
	for (;;) {
		if (poll(p, FLOOD_CONNS, 100) < 0)
			continue;
		for (size_t i = 0; i < FLOOD_CONNS; i++)
			if (p[i].fd < 0 || (p[i].revents & (POLLIN | POLLHUP | POLLERR))) {
				if (p[i].fd >= 0)
					close(p[i].fd);
				p[i].fd = flood_connect(port);
			}
	}
}

static void flood_of_idle_connections(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct ab_hold_answer a;
	struct task tasks[4];
	char out[8192];
	size_t opened = 0;
	unsigned seen, answered;
	int ready[2];
	pid_t flood;
	double end;

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 4, err, sizeof(err)), 0);
	s.maxconns = 448; /* what srun holds at the usual 1024 descriptors: (1024 - 128) / 2 */
	ticket_of(&s, 60, &t);
	assert_int_equal(pipe(ready), 0);
	if ((flood = fork()) == 0) {
		close(ready[0]);
		close(s.fd);
		flooder(s.port, ready[1]);
	}
	close(ready[1]);
	/* srun gathers while the flood builds, as it does while it probes */
	for (end = ab_now() + 30; ab_now() < end; usleep(10 * 1000)) {
		struct pollfd p = {.fd = ready[0], .events = POLLIN};

		ab_hold_gather(&s);
		if (poll(&p, 1, 0) == 1 && read(ready[0], &opened, sizeof(opened)) > 0)
			break;
	}
	close(ready[0]);
	if (opened < FLOOD_CONNS / 2)
		fail_msg("the flooder opened %zu connections of %d", opened, FLOOD_CONNS);
	for (unsigned i = 0; i < 4; i++)
		start_task(&tasks[i], &t, i);
	for (end = ab_now() + 60; ab_hold_gather(&s) < 4 && ab_now() < end;)
		usleep(10 * 1000);
	decided_answer(&a);
	seen = s.nseen;
	answered = ab_hold_serve(&s, &a, 30.0, NULL);
	kill(flood, SIGKILL);
	waitpid(flood, NULL, 0);
	ab_hold_close(&s);
	for (unsigned i = 0; i < 4; i++) {
		end_task(&tasks[i], out, sizeof(out));
		assert_contains(out, "0|0|||AUTOBATCH_BATCH_SIZE=96;");
	}
	assert_int_equal(seen, 4);
	assert_int_equal(answered, 4);
}

/* A stop (srun ending) ends the serving at once. */
static void stop_ends_serving(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_answer a;
	volatile sig_atomic_t stop = 1;
	double t0 = ab_now();

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 4, err, sizeof(err)), 0);
	decided_answer(&a);
	assert_int_equal(ab_hold_serve(&s, &a, 30.0, &stop), 0);
	assert_true(ab_now() - t0 < 1);
	ab_hold_close(&s);
}

/* SrunPortRange: the port is in the range; a range with every port taken says so. */
/* A held task that dies (its node failed) is noticed while srun gathers, with the node its
 * hello named; a node name srun would refuse is not sent, and the task is still heard. */
static void task_gone_while_held(void **state)
{
	struct ab_hold_server s;
	struct ab_hold_ticket t;
	struct ab_hold_answer a;
	struct task tasks[3];
	char out[8192];
	double end;
	int status;

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 3, err, sizeof(err)), 0);
	ticket_of(&s, 30, &t);
	start_task_on(&tasks[0], &t, 0, "node1");
	start_task_on(&tasks[1], &t, 1, "node2");
	start_task_on(&tasks[2], &t, 2, "bad node;$(x)");
	assert_int_equal(gather_until(&s, 3), 3);
	assert_int_equal(s.nlost, 0);
	kill(tasks[1].pid, SIGKILL);
	assert_int_equal(waitpid(tasks[1].pid, &status, 0), tasks[1].pid);
	close(tasks[1].fd);
	end = ab_now() + 10;
	while (!s.nlost && ab_now() < end) {
		ab_hold_gather(&s);
		usleep(20 * 1000);
	}
	assert_int_equal(s.nlost, 1);
	assert_int_equal(s.lost_task, 1);
	assert_string_equal(s.lost_node, "node2");
	assert_int_equal(s.nheld, 2);
	memset(&a, 0, sizeof(a));
	a.verdict = AB_HOLD_ABORT;
	snprintf(a.message, sizeof(a.message), "a task is gone");
	assert_int_equal(ab_hold_serve(&s, &a, 2.0, NULL), 2);
	end_task(&tasks[0], out, sizeof(out));
	assert_string_equal(out, "0|2|a task is gone||");
	end_task(&tasks[2], out, sizeof(out));
	assert_string_equal(out, "0|2|a task is gone||");
	ab_hold_close(&s);
}

static void port_range(void **state)
{
	struct ab_hold_server s, s2;

	(void)state;
	assert_int_equal(ab_hold_listen(&s, 0, 0, 1, err, sizeof(err)), 0);
	ab_hold_close(&s);
	assert_int_equal(ab_hold_listen(&s, 47100, 47109, 1, err, sizeof(err)), 0);
	assert_true(s.port >= 47100 && s.port <= 47109);
	assert_int_equal(ab_hold_listen(&s2, s.port, s.port, 1, err, sizeof(err)), -EADDRINUSE);
	assert_contains(err, "cannot listen for the step's tasks in SrunPortRange");
	assert_int_equal(ab_hold_listen(&s2, 10, 5, 1, err, sizeof(err)), -EINVAL);
	ab_hold_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decided_reaches_every_task),
		cmocka_unit_test(continue_and_abort_carry_their_message),
		cmocka_unit_test(wrong_tokens),
		cmocka_unit_test(srun_gone),
		cmocka_unit_test(no_answer_in_time),
		cmocka_unit_test(rogue_answer_sets_nothing_else),
		cmocka_unit_test(tickets),
		cmocka_unit_test(siphash_vectors),
		cmocka_unit_test(no_token_crosses_the_wire),
		cmocka_unit_test(silent_listener_is_not_waited_for),
		cmocka_unit_test(many_tasks_queued),
		cmocka_unit_test(beyond_what_srun_holds),
		cmocka_unit_test(stop_ends_serving),
		cmocka_unit_test(flood_of_idle_connections),
		cmocka_unit_test(task_gone_while_held),
		cmocka_unit_test(port_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
