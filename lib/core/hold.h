/* hold.h - the hold channel: the step srun launches before its batch size is known waits in
 * each task (task_init, as the user) until srun, probing meanwhile, answers it over TCP.
 *
 * Why: slurmd refuses a step credential older than cred_expire (120 s by default), and srun
 * creates the step, with its credential, before the plugin's local_user_init. A probe of
 * minutes must therefore run after the launch, not between the step's creation and its
 * launch. srun listens (ab_hold_listen) before it launches, names the port and two random
 * tokens in SLURM_AUTOBATCH_HOLD, and answers every task once it has decided
 * (ab_hold_serve). Each task connects back to the host slurmd names in SLURM_SRUN_COMM_HOST
 * (srun's own address as the node sees it), proves it knows the client token, checks the
 * server's, and gets the verdict and the variables to export (ab_hold_wait).
 *
 * srun gathers the tasks while it probes (ab_hold_gather, between the probe's polls), so it
 * knows before it rewrites anything whether every task can hear the decision.
 *
 * Wire format, text lines; neither token is ever sent, each side proves it knows its own:
 *   task -> srun: "AUTOBATCH-HOLD 2 <nonce> <global task id> [<node name>] <task proof>"
 *   srun -> task: "AUTOBATCH-HOLD 2 <srun proof>", then "WAIT" (the connection is held and
 *                 the verdict follows on it), "LATER" (srun holds too many: connect again
 *                 shortly) or the verdict: "DECIDED", "CONTINUE <message>" or "ABORT
 *                 <message>", then "NAME=VALUE" lines, then "END"; or "AUTOBATCH-HOLD 2
 *                 REFUSED" to a hello that is not this step's.
 * The task's nonce is fresh (128 random bits), so only srun, which holds the server token, can
 * answer it (ab_hold_proof): a program that took srun's port after srun died is told apart
 * at its first line, and one that stays silent past first_line_s is not waited for. The
 * task's proof is not fresh to srun: replaying a hello needs the wire between two hosts
 * (root), and gets only a verdict that is no secret.
 */
#ifndef AUTOBATCH_HOLD_H
#define AUTOBATCH_HOLD_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "error.h"

#define AB_HOLD_TOKEN_HEX 32 /* 128 random bits each */
#define AB_HOLD_VARS_MAX 20
#define AB_HOLD_NAME_MAX 64
#define AB_HOLD_VALUE_MAX (PATH_MAX + 1)
#define AB_HOLD_NODE_MAX 64
#define AB_HOLD_PROOF_HEX 16 /* a SipHash-2-4 tag */

enum ab_hold_verdict {
	AB_HOLD_DECIDED,  /* export the variables, then run the command */
	AB_HOLD_CONTINUE, /* the command runs with the user's original settings */
	AB_HOLD_ABORT,    /* the task ends before the command */
};

struct ab_hold_var {
	char name[AB_HOLD_NAME_MAX];
	char value[AB_HOLD_VALUE_MAX];
};

struct ab_hold_answer {
	enum ab_hold_verdict verdict;
	char message[AB_ERR_MAX];
	size_t nvars;
	struct ab_hold_var vars[AB_HOLD_VARS_MAX];
};

/* Adds NAME=VALUE to the answer; -E2BIG when full, -EINVAL for a name the tasks would refuse
 * (ab_hold_name_ok) or a value with a control character. */
int ab_hold_answer_add(struct ab_hold_answer *a, const char *name, const char *value);

/* The variables a task takes from srun: the decision's AUTOBATCH_* names and their SLURM_
 * twins, nothing else (the channel must not become a way to set LD_PRELOAD). */
bool ab_hold_name_ok(const char *name);

/* ---- srun's side ---- */

struct ab_hold_conn {
	int fd;
	double since;       /* when accepted */
	bool held;          /* said hello and was told to wait */
	unsigned task;
	char node[AB_HOLD_NODE_MAX]; /* the task's node, as its hello names it */
	char nonce[AB_HOLD_TOKEN_HEX + 1]; /* its hello's, which srun's proof answers */
	size_t len;
	char hello[192];
	struct sockaddr_storage peer; /* its source: silent ones are bounded per source */
};

struct ab_hold_server {
	int fd; /* listening, -1 once closed */
	unsigned port;
	char client_token[AB_HOLD_TOKEN_HEX + 1];
	char server_token[AB_HOLD_TOKEN_HEX + 1];
	unsigned expected;        /* the step's tasks */
	unsigned char *seen;      /* per task: 1 once it said hello, 2 once answered */
	unsigned nseen, nanswered;
	/* held tasks whose connection ended before the verdict: the task is gone (its node
	 * died, or it was killed); the first one's id and node, for the user */
	unsigned nlost, lost_task;
	char lost_node[AB_HOLD_NODE_MAX];
	struct ab_hold_conn *conns; /* waiting for their hello, or held */
	size_t nconns, nheld, maxconns; /* beyond maxconns held, a task is told LATER */
};

/* Listens on every address (IPv6 and IPv4) on a port in [lo, hi] (Slurm's SrunPortRange, so
 * a site's firewall lets the tasks through), any port when lo is 0, for a step of `expected`
 * tasks; draws both tokens. 0 or a negative errno with a message. */
int ab_hold_listen(struct ab_hold_server *s, unsigned lo, unsigned hi, unsigned expected,
		   char *err, size_t errlen);

/* How long a held task waits for srun's answer: while an identical srun holds the cache
 * entry's lock (a probe, and a minute), then the probe (and the eval probe), and 10 minutes
 * for srun to gather the tasks, apply and answer. Any probe_timeout's fits a ticket. */
unsigned ab_hold_wait_s(unsigned probe_timeout, bool eval);

/* The value of SLURM_AUTOBATCH_HOLD for the tasks: "2:PORT:WAIT_S:CLIENT:SERVER" (2: the protocol), where
 * WAIT_S bounds how long a task waits for its answer. */
int ab_hold_ticket_format(const struct ab_hold_server *s, unsigned wait_s, char *buf,
			  size_t buflen);

/* Takes what the tasks say now, without waiting: accepts their connections, checks their
 * hellos, tells them to wait, and notices a held task whose connection ended (nlost; a
 * node that vanished without a word shows after TCP keepalive's ~35 s). Called between the
 * probe's polls. Returns how many tasks have said hello so far. */
unsigned ab_hold_gather(struct ab_hold_server *s);

/* Answers every task with a: those held at once, those that connect later as they do, until
 * every task has had it, serve_s seconds have passed, or *stop is set. Returns how many tasks
 * were answered in all. */
unsigned ab_hold_serve(struct ab_hold_server *s, const struct ab_hold_answer *a, double serve_s,
		       const volatile sig_atomic_t *stop);

/* Closes the port and every connection (a task still waiting sees srun gone). */
void ab_hold_close(struct ab_hold_server *s);

/* ---- a task's side ---- */

struct ab_hold_ticket {
	unsigned port;
	unsigned wait_s;
	char client_token[AB_HOLD_TOKEN_HEX + 1];
	char server_token[AB_HOLD_TOKEN_HEX + 1];
	unsigned task; /* the task's global id, which it names in its hello */
	char node[AB_HOLD_NODE_MAX]; /* its node's name, named too ("" for none) */
	/* a connection silent this long before srun's first line is not srun's (srun answers a
	 * hello at its next pass), and connections closed or silent unanswered are tried again
	 * for connect_for_s; set by ab_hold_ticket_parse */
	double first_line_s, connect_for_s;
};

/* What only the holder of token (hex) can say of a connection: SipHash-2-4 under the token of
 * "<role> <nonce> <task>" as 16 hex digits and a NUL in proof. The role ("srun" or "task")
 * keeps one side's proof from serving as the other's. 0, or -EINVAL for a token not shaped. */
int ab_hold_proof(const char *token, const char *role, const char *nonce, unsigned task,
		  char *proof);

/* Parses SLURM_AUTOBATCH_HOLD (hostile: it is in the user's environment). */
int ab_hold_ticket_parse(const char *value, struct ab_hold_ticket *t, char *err, size_t errlen);

/* Connects to host:t->port (retrying while srun's listen queue is full, or when srun says
 * LATER), names task t->task, and waits up to t->wait_s seconds in all for the answer, which it
 * checks line by line. 0 with *a, or a negative errno with one sentence (-ECONNREFUSED,
 * -ETIMEDOUT, -EPIPE: srun gone, -EPROTO, -EACCES: a wrong proof, -ENOTCONN: nothing that
 * answered was srun). */
int ab_hold_wait(const char *host, const struct ab_hold_ticket *t, struct ab_hold_answer *a,
		 char *err, size_t errlen);

#endif
