/* fuzz_hold.c - the hold channel's hostile text: a task's hello as srun reads it (anyone on the
 * network may connect), and srun's answer as a task reads it (after a proof, but checked).
 * Byte 0: 0 raw hello, 1 hello with a correct proof around fuzzed fields, 2 srun's first line
 * and answer. The hold .c files are included for their static parsers. */
#include "hold_server.c"
#include "hold_client.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...) do { fprintf(stderr, "property violated: " __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

static const char tok_c[] = "0123456789abcdef0123456789abcdef";
static const char tok_s[] = "fedcba9876543210fedcba9876543210";

static void hello(const char *text, size_t len, unsigned expected)
{
	static struct ab_hold_server s;
	static struct ab_hold_conn c;

	memset(&s, 0, sizeof(s));
	memset(&c, 0, sizeof(c));
	memcpy(s.client_token, tok_c, sizeof(s.client_token));
	memcpy(s.server_token, tok_s, sizeof(s.server_token));
	s.expected = expected ? expected : 1;
	c.len = len < sizeof(c.hello) - 1 ? len : sizeof(c.hello) - 1;
	memcpy(c.hello, text, c.len);
	c.hello[c.len] = '\0';
	if (!memchr(c.hello, '\n', c.len))
		return;
	if (hello_ok(&s, &c)) {
		if (c.task >= s.expected)
			FAIL("task %u of %u", c.task, s.expected);
		if (c.node[0] && !ab_hold_node_ok(c.node, strlen(c.node)))
			FAIL("node");
		if (!ab_hold_token_shaped(c.nonce, strlen(c.nonce)))
			FAIL("nonce '%s'", c.nonce);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[4096];
	size_t len;

	if (size < 2 || size > 4000)
		return 0;
	len = size - 2;
	memcpy(text, data + 2, len);
	text[len] = '\0';
	switch (data[0] % 3) {
	case 0:
		hello(text, len, data[1]);
		break;
	case 1: { /* "<nonce> <task> [<node>] ": fuzz; the proof made right */
		char nonce[64] = "", task[32] = "", node[128] = "", line[512], proof[AB_HOLD_PROOF_HEX + 1];
		long v = 0;

		sscanf(text, "%63s %31s %127s", nonce, task, node);
		if (ab_parse_whole(task, 0, LONG_MAX, &v) < 0)
			v = strtol(task, NULL, 10);
		if (ab_hold_proof(tok_c, "task", nonce, (unsigned)v, proof) < 0)
			return 0;
		snprintf(line, sizeof(line), MAGIC "%s %s%s%s %s\n", nonce, task, node[0] ? " " : "", node, proof);
		hello(line, strlen(line), data[1]);
		break;
	}
	default: {
		struct ab_hold_ticket t = {0};
		struct ab_hold_answer a;
		char nonce[] = "00112233445566778899aabbccddeeff", proof[AB_HOLD_PROOF_HEX + 1], reply[8192];
		int rc;

		memcpy(t.server_token, tok_s, sizeof(t.server_token));
		t.task = data[1];
		(void)check_server(text, &t, nonce);
		ab_hold_proof(tok_s, "srun", nonce, t.task, proof);
		snprintf(reply, sizeof(reply), MAGIC "%s\n%s", proof, text);
		if (check_server(reply, &t, nonce) != 0)
			FAIL("own proof refused");
		rc = parse_answer(strchr(reply, '\n') + 1, &a);
		if (rc == 0) {
			if (a.nvars > AB_HOLD_VARS_MAX)
				FAIL("nvars");
			for (size_t i = 0; i < a.nvars; i++)
				if (!ab_hold_name_ok(a.vars[i].name))
					FAIL("var name '%s' taken", a.vars[i].name);
		}
	}
	}
	return 0;
}
