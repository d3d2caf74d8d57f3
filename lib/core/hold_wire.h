/* hold_wire.h - what both ends of the hold channel share (lib/core/hold.c): the protocol's
 * limits and timeouts, tokens and proofs, and bytes on a socket with deadlines. Private to
 * hold.c, hold_server.c (srun's end) and hold_client.c (a task's end).
 */
#ifndef AUTOBATCH_HOLD_WIRE_H
#define AUTOBATCH_HOLD_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "hold.h"
#include "input_limits.h"

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
/* the longest wait a ticket carries: ab_hold_wait_s at the largest probe_timeout, and more */
#define WAIT_MAX_S (3L * AB_TIMEOUT_MAX + 3600L)

/* AB_HOLD_TOKEN_HEX random hex digits into hex (NUL-terminated): 0 or -errno. */
int ab_hold_draw_token(char *hex);
/* Whether s is len hex digits of a token's length. */
bool ab_hold_token_shaped(const char *s, size_t len);
/* Whether text starts with the proof the holder of token gives; its time tells nothing of
 * how much of a guess was right. */
bool ab_hold_proof_equal(const char *text, const char *token, const char *role,
			 const char *nonce, unsigned task);
/* poll() for events on fd until the clock reads `until`: 0, -ETIMEDOUT or -errno. */
int ab_hold_wait_fd(int fd, short events, double until);
/* All of buf, without SIGPIPE, by `until`: 0, -ETIMEDOUT or -errno. */
int ab_hold_send_all(int fd, const char *buf, size_t len, double until);
/* Reads what has come into buf at *len (NUL-terminated), waiting until `until` for some:
 * 0, -EPIPE at EOF, -EMSGSIZE when full, -ETIMEDOUT. */
int ab_hold_recv_some(int fd, char *buf, size_t buflen, size_t *len, double until);
/* A node name a hello may carry: a host name shorter than AB_HOLD_NODE_MAX. */
bool ab_hold_node_ok(const char *s, size_t len);
bool ab_hold_ends_with(const char *text, size_t len, const char *end);

#endif
