/* SPDX-License-Identifier: MIT */
/*
 * rcluster.c -- a Redis Cluster client on hiredis (rcluster.h).
 *
 * hiredis connects and parses the replies; the commands are framed here
 * and sent with sendmsg(MSG_NOSIGNAL).  So a value goes out from the
 * caller's pieces (redisCommandArgv() wants it in one buffer, and copies
 * it into its output buffer again), and a write to a node that died fails
 * with EPIPE instead of raising SIGPIPE in the process, as hiredis's own
 * write() would.
 *
 * Routing, as Redis Cluster's specification asks of a client:
 * - a key goes to the node of its slot in the map CLUSTER SLOTS gave; the
 *   map is fetched by the first command, again after each -MOVED, and
 *   before a command for a node that failed (its slots may have moved
 *   since: a replica's failover), or for a slot the map has no node for;
 * - -MOVED: the slot has a new owner for good: the map is fetched again,
 *   and the slot pointed at the node named whatever that map says (the
 *   node asked may not know yet);
 * - -ASK: the slot is migrating and this key is (or is to be) on the node
 *   named: ASKING and the command there, this once, the map unchanged;
 * - -TRYAGAIN, -CLUSTERDOWN: the same again after a short sleep, until the
 *   timeout has passed since the command began.
 * At most RC_REDIRECTS redirects per command, so that nodes which
 * disagree cannot send a command round for ever.
 *
 * Time: a command ends by one deadline, the timeout after it began:
 * every connect, send and wait for a reply in it (redirects, retries and
 * map refreshes included) waits only for what is left of it, in poll(),
 * which also watches the handle's cancel descriptor (mkv_rc_watch()).  A
 * map refresh asks at most RC_REFRESH_ASK nodes.
 *
 * Memory: hiredis parses a reply only once it is whole.  Until then the
 * bytes are gathered here, and scanned as they come (scan()): a reply
 * longer than the command allows (a GET's value longer than the caller's
 * limit, a map of more than RC_MAP_MAX bytes, a line that never ends) is
 * refused as soon as its header says so, before its bytes are read.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "internal.h"
#include "rcluster.h"

#define RC_SLOTS 16384U
#define RC_SEEDS_MAX 16U
#define RC_HOST_MAX 255U
/* every slot on a node of its own, and the seeds: an index fits a uint16_t */
#define RC_NODES_MAX (RC_SLOTS + RC_SEEDS_MAX)
#define RC_NONE UINT16_MAX
#define RC_REDIRECTS 5
/* between tries of a command the cluster cannot serve yet */
#define RC_RETRY_NS 20000000ULL
/* iovecs per sendmsg(), well under IOV_MAX */
#define RC_BATCH 64U
/* nodes one map refresh asks, at most */
#define RC_REFRESH_ASK 3U
/* the longest reply to CLUSTER SLOTS, and to SET, DEL and ASKING */
#define RC_MAP_MAX (4U << 20)
#define RC_SHORT_MAX 4096U
/* a status, error or integer line, and nesting, at most (hiredis: 7 levels) */
#define RC_LINE_MAX 4096U
#define RC_DEPTH_MAX 7

struct rc_node {
	char host[RC_HOST_MAX + 1];
	int port;
	redisContext *ctx;      /* NULL until needed, and after a failure */
	char *in;               /* bytes read from it and not yet parsed */
	size_t inlen, incap;
	bool used;              /* the entry names a node (else it is free) */
	bool seed;              /* from mkv_rc_open()'s list: kept whatever the map says */
	bool failed;            /* its last connect or command failed */
	bool in_map;            /* scratch of map_prune() */
	bool tried;             /* scratch of map_refresh() */
};

struct mkv_rc {
	uint32_t timeout_ms;
	uint64_t deadline;              /* the command's end */
	int cancel_fd;                  /* readable: every command fails; -1 none */
	struct rc_node *nodes;
	unsigned nnodes, cap;           /* entries in use or freed; allocated */
	bool mapped;                    /* owner[] is from a CLUSTER SLOTS */
	uint16_t owner[RC_SLOTS];       /* each slot's node, RC_NONE if unknown */
	uint16_t next[RC_SLOTS];        /* the map being read */
	unsigned long moved, asked;
	char why[512];                  /* the latest failure inside this command */
	char lasterr[512];              /* the latest command's failure, kept */
};

/*
 * A command as RESP puts it on the wire: the framing in text, the key and
 * the value sent from where the caller has them.  It goes out as head
 * (framing, key, framing), the value's pieces, tail (framing).
 */
struct rc_req {
	const char *name;       /* for messages */
	size_t limit;           /* the longest reply it takes */
	char text[160];
	struct iovec head[3];
	const struct iovec *val;
	size_t valcnt;
	struct iovec tail;
};

/* A position in a request's pieces, for sendmsg() and what it took. */
struct rc_cursor {
	const struct iovec *grp[3];
	size_t n[3];
	unsigned g;
	size_t i, off;
};

/* This failure of node n, "redis host:port: ...", into c->why; -1. */
static int __attribute__((format(printf, 3, 4)))
node_fail(struct mkv_rc *c, const struct rc_node *n, const char *fmt, ...)
{
	int len = snprintf(c->why, sizeof(c->why), "redis %s:%d: ", n->host, n->port);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why + len, sizeof(c->why) - (size_t)len, fmt, ap);
	va_end(ap);
	return -1;
}

/* The command failed for the reason in c->why: keep it, and say it. */
static int
rc_failed(struct mkv_rc *c)
{
	memcpy(c->lasterr, c->why, sizeof(c->lasterr));
	return mkv_err(MKV_E_REMOTE, "%s", c->lasterr);
}

static const char *
type_name(int type)
{
	switch (type) {
	case REDIS_REPLY_STRING:
		return "a string";
	case REDIS_REPLY_ARRAY:
		return "an array";
	case REDIS_REPLY_INTEGER:
		return "an integer";
	case REDIS_REPLY_NIL:
		return "nil";
	case REDIS_REPLY_STATUS:
		return "a status";
	default:
		return "an error";
	}
}

/* ---- slots ---- */

static unsigned
crc16(const uint8_t *p, size_t len)
{
	unsigned crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (unsigned)p[i] << 8;
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
	}
	return crc & 0xffff;
}

unsigned
mkv_rc_slot(const void *key, size_t len)
{
	const uint8_t *k = key, *open = len ? memchr(k, '{', len) : NULL, *close;

	/* keys that share a tag share a slot, so multi-key commands can work on them */
	if (open) {
		close = memchr(open + 1, '}', len - (size_t)(open + 1 - k));
		if (close && close > open + 1)
			return crc16(open + 1, (size_t)(close - open - 1)) % RC_SLOTS;
	}
	return crc16(k, len) % RC_SLOTS;
}

/* ---- nodes ---- */

/* The entry of node host:port, made if there is none; its index, or -1 with c->why. */
static int
node_find(struct mkv_rc *c, const char *host, size_t hlen, int port)
{
	unsigned free_at = c->nnodes;
	struct rc_node *n;

	if (hlen == 0 || hlen > RC_HOST_MAX || memchr(host, '\0', hlen)) {
		snprintf(c->why, sizeof(c->why), "redis: the cluster named a host of %zu bytes", hlen);
		return -1;
	}
	for (unsigned i = 0; i < c->nnodes; i++) {
		n = &c->nodes[i];
		if (!n->used) {
			free_at = free_at < i ? free_at : i;
			continue;
		}
		if (n->port == port && strlen(n->host) == hlen && memcmp(n->host, host, hlen) == 0)
			return (int)i;
	}
	if (free_at == c->cap) {
		unsigned cap = c->cap * 2 < RC_NODES_MAX ? c->cap * 2 : RC_NODES_MAX;

		n = cap > c->cap ? realloc(c->nodes, cap * sizeof(*n)) : NULL;
		if (!n) {
			snprintf(c->why, sizeof(c->why), "redis: no room for node %.*s:%d",
					(int)hlen, host, port);
			return -1;
		}
		c->nodes = n;
		c->cap = cap;
	}
	if (free_at == c->nnodes)
		c->nnodes++;
	n = &c->nodes[free_at];
	memset(n, 0, sizeof(*n));
	memcpy(n->host, host, hlen);
	n->port = port;
	n->used = true;
	return (int)free_at;
}

static void
node_drop(struct rc_node *n)
{
	redisFree(n->ctx);
	n->ctx = NULL;
	free(n->in);
	n->in = NULL;
	n->inlen = n->incap = 0;
}

/* How a request failed: a broken connection (another may work), a slow node, a cancel. */
enum { RC_BROKEN = -1, RC_SLOW = -2, RC_CANCELLED = -3 };

/*
 * Wait until node n's socket is ready for events (POLLIN, POLLOUT), by the
 * command's deadline: 0, or RC_SLOW, RC_CANCELLED or RC_BROKEN with
 * c->why saying what was waited for.
 */
static int
node_wait(struct mkv_rc *c, struct rc_node *n, short events, const char *what)
{
	struct pollfd fds[2] = { { .fd = n->ctx->fd, .events = events },
		{ .fd = c->cancel_fd, .events = POLLIN } };

	for (;;) {
		uint64_t now = mkv_clock_now();
		int ms = now >= c->deadline ? 0 : (int)((c->deadline - now + 999999) / 1000000);
		int rc = poll(fds, c->cancel_fd >= 0 ? 2 : 1, ms);

		if (rc < 0 && errno == EINTR)
			continue;
		if (c->cancel_fd >= 0 && fds[1].revents) {
			node_fail(c, n, "%s: cancelled: the handle is closing", what);
			return RC_CANCELLED;
		}
		if (rc > 0)
			return 0;
		if (rc < 0) {
			node_fail(c, n, "%s: poll: %s", what, strerror(errno));
			return RC_BROKEN;
		}
		if (mkv_clock_now() >= c->deadline) {
			node_fail(c, n, "%s: no answer within the %" PRIu32 " ms timeout", what,
					c->timeout_ms);
			return RC_SLOW;
		}
	}
}

/* Connect node n unless it is, by the command's deadline; 0, or -1 with c->why. */
static int
node_connect(struct mkv_rc *c, struct rc_node *n)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (n->ctx)
		return 0;
	/* the name's lookup is not bounded; the connect is, by node_wait() */
	n->ctx = redisConnectNonBlock(n->host, n->port);
	if (!n->ctx) {
		n->failed = true;
		return node_fail(c, n, "connect: out of memory");
	}
	if (n->ctx->err) {
		node_fail(c, n, "connect: %s", n->ctx->errstr);
	} else if (!node_wait(c, n, POLLOUT, "connect")) {
		if (getsockopt(n->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
			return 0;
		node_fail(c, n, "connect: %s", strerror(err ? err : errno));
	}
	node_drop(n);
	n->failed = true;
	return -1;
}

/* ---- requests ---- */

/* key's command: GET, DEL, or SET of the value's pieces (vlen bytes), with EX ttl_s if not 0. */
static void
req_key(struct rc_req *q, const char *name, const void *key, size_t klen,
		const struct iovec *val, size_t valcnt, size_t vlen, uint32_t ttl_s)
{
	bool set = strcmp(name, "SET") == 0;
	size_t room = sizeof(q->text);
	char ttl[16];
	int a, b, end;

	snprintf(ttl, sizeof(ttl), "%" PRIu32, ttl_s);
	/* the array, the name, the key's length; the key; its end (and the value's length) */
	a = snprintf(q->text, room, "*%d\r\n$%zu\r\n%s\r\n$%zu\r\n",
			!set ? 2 : ttl_s ? 5 : 3, strlen(name), name, klen);
	if (set)
		b = a + snprintf(q->text + a, room - (size_t)a, "\r\n$%zu\r\n", vlen);
	else
		b = a + snprintf(q->text + a, room - (size_t)a, "\r\n");
	/* then the value; its end, and EX */
	end = b;
	if (set && ttl_s)
		end += snprintf(q->text + b, room - (size_t)b, "\r\n$2\r\nEX\r\n$%zu\r\n%s\r\n",
				strlen(ttl), ttl);
	else if (set)
		end += snprintf(q->text + b, room - (size_t)b, "\r\n");
	q->name = name;
	q->limit = RC_SHORT_MAX;
	q->head[0] = (struct iovec){ q->text, (size_t)a };
	q->head[1] = (struct iovec){ (void *)key, klen };
	q->head[2] = (struct iovec){ q->text + a, (size_t)(b - a) };
	q->val = val;
	q->valcnt = valcnt;
	q->tail = (struct iovec){ q->text + b, (size_t)(end - b) };
}

static void
req_slots(struct rc_req *q)
{
	static const char slots[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";

	memset(q, 0, sizeof(*q));
	q->name = "CLUSTER SLOTS";
	q->limit = RC_MAP_MAX;
	q->head[0] = (struct iovec){ (void *)slots, sizeof(slots) - 1 };
}

/* The pieces from the cursor on, at most max of them, into batch; how many. */
static size_t
cursor_fill(const struct rc_cursor *cu, struct iovec *batch, size_t max)
{
	unsigned g = cu->g;
	size_t i = cu->i, off = cu->off, n = 0;

	while (n < max && g < 3) {
		if (i == cu->n[g]) {
			g++;
			i = 0;
			continue;
		}
		if (cu->grp[g][i].iov_len > off) {
			batch[n].iov_base = (char *)cu->grp[g][i].iov_base + off;
			batch[n++].iov_len = cu->grp[g][i].iov_len - off;
		}
		i++;
		off = 0;
	}
	return n;
}

static void
cursor_skip(struct rc_cursor *cu, size_t bytes)
{
	while (bytes > 0) {
		size_t avail;

		if (cu->i == cu->n[cu->g]) {
			cu->g++;
			cu->i = 0;
			continue;
		}
		avail = cu->grp[cu->g][cu->i].iov_len - cu->off;
		if (bytes < avail) {
			cu->off += bytes;
			return;
		}
		bytes -= avail;
		cu->i++;
		cu->off = 0;
	}
}

/* Send request q to node n, after ASKING if asked to; 0, RC_BROKEN, RC_SLOW or RC_CANCELLED. */
static int
req_send(struct mkv_rc *c, struct rc_node *n, const struct rc_req *q, bool asking)
{
	static const char ask[] = "*1\r\n$6\r\nASKING\r\n";
	const struct iovec pre[4] = { { (void *)ask, sizeof(ask) - 1 }, q->head[0], q->head[1],
			q->head[2] };
	struct rc_cursor cu = {
		.grp = { asking ? pre : pre + 1, q->val, &q->tail },
		.n = { asking ? 4 : 3, q->valcnt, 1 },
	};
	struct iovec batch[RC_BATCH];
	struct msghdr m = { .msg_iov = batch };
	ssize_t sent;
	int rc;

	while ((m.msg_iovlen = cursor_fill(&cu, batch, RC_BATCH)) > 0) {
		sent = sendmsg(n->ctx->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (sent > 0) {
			cursor_skip(&cu, (size_t)sent);
		} else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if ((rc = node_wait(c, n, POLLOUT, q->name)))
				return rc;
		} else if (sent == 0 || errno != EINTR) {
			node_fail(c, n, "%s: %s", q->name, sent ? strerror(errno) : "sent nothing");
			return RC_BROKEN;
		}
	}
	return 0;
}

/* Where scan() is in a reply: the next item's offset, and the arrays open around it. */
struct rc_scan {
	size_t pos;
	int depth;
	long long left[RC_DEPTH_MAX];
};

/* The number on a "$", "*" or ":" line, from p to eol; *ok false if it is none. */
static long long
line_number(const char *p, const char *eol, bool *ok)
{
	char num[24], *end;
	long long v;

	*ok = false;
	if (eol - p < 1 || (size_t)(eol - p) >= sizeof(num))
		return -1;
	memcpy(num, p, (size_t)(eol - p));
	num[eol - p] = '\0';
	errno = 0;
	v = strtoll(num, &end, 10);
	*ok = *end == '\0' && errno == 0;
	return v;
}

/*
 * Go on scanning node n's reply to `what` in n->in: 1 when it is whole
 * (its first s->pos bytes), 0 when more must come, -1 (c->why) when it
 * is not RESP, or longer than limit bytes: said from its headers, before
 * the bytes they announce are read.
 */
static int
scan(struct mkv_rc *c, const struct rc_node *n, struct rc_scan *s, size_t limit, const char *what)
{
	for (;;) {
		const char *p = n->in + s->pos, *eol;
		size_t avail = n->inlen - s->pos, end, room;
		long long v;
		bool ok;

		eol = avail ? memmem(p, avail, "\r\n", 2) : NULL;
		if (!eol)
			return avail > RC_LINE_MAX || n->inlen > limit ? node_fail(c, n,
					"%s: a reply line of more than %u bytes", what, RC_LINE_MAX) : 0;
		end = (size_t)(eol + 2 - n->in);
		room = end < limit ? limit - end : 0;
		switch (*p) {
		case '+':
		case '-':
			break;
		case ':':
			line_number(p + 1, eol, &ok);
			if (!ok)
				return node_fail(c, n, "%s: a malformed integer reply", what);
			break;
		case '$':
			v = line_number(p + 1, eol, &ok);
			if (!ok || v < -1)
				return node_fail(c, n, "%s: a malformed bulk length", what);
			if (v < 0)
				break;
			if ((uint64_t)v + 2 > room)
				return node_fail(c, n, "%s: a reply announcing %lld bytes, more than "
						"the %zu it could take there", what, v,
						room >= 2 ? room - 2 : 0);
			if (n->inlen < end + (size_t)v + 2)
				return 0;
			if (memcmp(n->in + end + v, "\r\n", 2) != 0)
				return node_fail(c, n, "%s: a bulk reply not ended by CRLF", what);
			end += (size_t)v + 2;
			break;
		case '*':
			v = line_number(p + 1, eol, &ok);
			if (!ok || v < -1)
				return node_fail(c, n, "%s: a malformed array length", what);
			if (v <= 0)
				break;
			/* every element takes 3 bytes at least */
			if ((uint64_t)v > room / 3)
				return node_fail(c, n, "%s: a reply announcing %lld elements, more than "
						"the %zu bytes this command takes can hold", what, v, limit);
			if (s->depth == RC_DEPTH_MAX)
				return node_fail(c, n, "%s: arrays nested more than %d deep", what,
						RC_DEPTH_MAX);
			s->left[s->depth++] = v;
			s->pos = end;
			continue;
		default:
			return node_fail(c, n, "%s: a reply that is not RESP (0x%02x)", what,
					(unsigned char)*p);
		}
		s->pos = end;
		/* an item done: the arrays it ends are items done too */
		for (;;) {
			if (s->depth == 0)
				return 1;
			if (--s->left[s->depth - 1] > 0)
				break;
			s->depth--;
		}
	}
}

/*
 * Node n's next reply to `what`, of at most limit bytes, read by the
 * command's deadline and parsed whole by hiredis: 0 with it in *out,
 * RC_BROKEN, RC_SLOW or RC_CANCELLED.  Bytes after it stay in n->in.
 */
static int
reply_read(struct mkv_rc *c, struct rc_node *n, const char *what, size_t limit, redisReply **out)
{
	struct rc_scan s = { 0 };
	void *r = NULL;
	ssize_t got;
	int rc;

	while ((rc = scan(c, n, &s, limit, what)) == 0) {
		if (n->inlen == n->incap) {
			size_t cap = n->incap ? n->incap * 2 : 16384, most = limit + RC_LINE_MAX;
			char *in;

			cap = cap < most ? cap : most;
			if (cap <= n->incap || !(in = realloc(n->in, cap))) {
				node_fail(c, n, "%s: no memory for a reply", what);
				return RC_BROKEN;
			}
			n->in = in;
			n->incap = cap;
		}
		got = read(n->ctx->fd, n->in + n->inlen, n->incap - n->inlen);
		if (got > 0) {
			n->inlen += (size_t)got;
		} else if (got == 0) {
			node_fail(c, n, "%s: the connection was closed", what);
			return RC_BROKEN;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			if ((rc = node_wait(c, n, POLLIN, what)))
				return rc;
		} else if (errno != EINTR) {
			node_fail(c, n, "%s: %s", what, strerror(errno));
			return RC_BROKEN;
		}
	}
	if (rc < 0)
		return RC_BROKEN;
	if (redisReaderFeed(n->ctx->reader, n->in, s.pos) != REDIS_OK ||
	    redisReaderGetReply(n->ctx->reader, &r) != REDIS_OK || !r) {
		node_fail(c, n, "%s: %s", what, n->ctx->reader->err ? n->ctx->reader->errstr :
				"a reply hiredis did not take");
		return RC_BROKEN;
	}
	memmove(n->in, n->in + s.pos, n->inlen - s.pos);
	n->inlen -= s.pos;
	*out = r;
	return 0;
}

/* Request q on connected node n (after ASKING if asked to): its reply in *out; 0, RC_BROKEN, RC_SLOW or RC_CANCELLED. */
static int
node_do(struct mkv_rc *c, struct rc_node *n, const struct rc_req *q, bool asking, redisReply **out)
{
	redisReply *ack;
	int rc;

	if ((rc = req_send(c, n, q, asking)))
		return rc;
	if (asking) {
		if ((rc = reply_read(c, n, "ASKING", RC_SHORT_MAX, &ack)))
			return rc;
		if (ack->type != REDIS_REPLY_STATUS) {
			node_fail(c, n, "ASKING: %s", ack->type == REDIS_REPLY_ERROR ? ack->str :
					type_name(ack->type));
			freeReplyObject(ack);
			return RC_BROKEN;
		}
		freeReplyObject(ack);
	}
	return reply_read(c, n, q->name, q->limit, out);
}

/*
 * Whether kept connection n is out of step: bytes came that no request
 * asked for (a reply too many, kept from the last command or arrived
 * since), or the node closed it.  Its next reply would not be the next
 * request's.
 */
static bool
stray(struct rc_node *n)
{
	struct pollfd pf = { .fd = n->ctx->fd, .events = POLLIN };

	return n->inlen > 0 || poll(&pf, 1, 0) != 0;
}

/*
 * Request q on node i, connected first if need be: its reply in *out; 0,
 * or -1 with c->why.  A connection kept from before that turns out dead
 * (the node restarted, or closed it while idle) is made again and the
 * request sent again, once per command (*redone); not one that timed
 * out: the node is there but slow, and another try would double the wait.
 * One out of step (stray()) is made again before the request goes.
 */
static int
exchange(struct mkv_rc *c, unsigned i, const struct rc_req *q, bool asking, bool *redone,
		redisReply **out)
{
	struct rc_node *n = &c->nodes[i];

	for (;;) {
		bool kept;
		int rc;

		if (n->ctx && stray(n))
			node_drop(n);
		kept = n->ctx != NULL;
		if (node_connect(c, n))
			return -1;
		if ((rc = node_do(c, n, q, asking, out)) == 0) {
			n->failed = false;
			return 0;
		}
		node_drop(n);
		n->failed = true;
		if (!kept || rc != RC_BROKEN || *redone)
			return -1;
		*redone = true;
	}
}

/* ---- the slot map ---- */

/* Close and forget the nodes the map no longer names, but the seeds. */
static void
map_prune(struct mkv_rc *c)
{
	for (unsigned i = 0; i < c->nnodes; i++)
		c->nodes[i].in_map = false;
	for (unsigned s = 0; s < RC_SLOTS; s++)
		if (c->owner[s] != RC_NONE)
			c->nodes[c->owner[s]].in_map = true;
	for (unsigned i = 0; i < c->nnodes; i++) {
		struct rc_node *n = &c->nodes[i];

		if (n->used && !n->seed && !n->in_map) {
			node_drop(n);
			n->used = false;
		}
	}
}

/*
 * Node i's CLUSTER SLOTS reply r: entries [first, last, [host, port, ...],
 * replicas...].  A nil or empty host is node i's own (the node does not
 * know its address); "?" is one it does not know: those slots stay
 * without a node.  0, or -1 with c->why (the map is left as it was).
 */
static int
map_read(struct mkv_rc *c, unsigned i, const redisReply *r)
{
	char self[RC_HOST_MAX + 1];

	if (r->type == REDIS_REPLY_ERROR)
		return node_fail(c, &c->nodes[i], "CLUSTER SLOTS: %s", r->str);
	if (r->type != REDIS_REPLY_ARRAY)
		return node_fail(c, &c->nodes[i], "CLUSTER SLOTS: %s reply", type_name(r->type));
	/* node_find() may move the nodes */
	memcpy(self, c->nodes[i].host, sizeof(self));
	for (unsigned s = 0; s < RC_SLOTS; s++)
		c->next[s] = RC_NONE;
	for (size_t k = 0; k < r->elements; k++) {
		const redisReply *e = r->element[k], *m, *h, *p;
		const char *host;
		size_t hlen;
		int j;

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
				e->element[0]->type != REDIS_REPLY_INTEGER ||
				e->element[1]->type != REDIS_REPLY_INTEGER ||
				e->element[0]->integer < 0 ||
				e->element[0]->integer > e->element[1]->integer ||
				e->element[1]->integer >= RC_SLOTS ||
				(m = e->element[2])->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
				((h = m->element[0])->type != REDIS_REPLY_STRING &&
				h->type != REDIS_REPLY_NIL) ||
				(p = m->element[1])->type != REDIS_REPLY_INTEGER ||
				p->integer < 1 || p->integer > 65535)
			return node_fail(c, &c->nodes[i], "CLUSTER SLOTS: entry %zu is malformed", k);
		if (h->type == REDIS_REPLY_NIL || h->len == 0) {
			host = self;
			hlen = strlen(self);
		} else if (h->len == 1 && h->str[0] == '?') {
			continue;
		} else {
			host = h->str;
			hlen = h->len;
		}
		if ((j = node_find(c, host, hlen, (int)p->integer)) < 0)
			return -1;
		for (long long s = e->element[0]->integer; s <= e->element[1]->integer; s++)
			c->next[s] = (uint16_t)j;
	}
	memcpy(c->owner, c->next, sizeof(c->owner));
	c->mapped = true;
	map_prune(c);
	return 0;
}

/* Which round of map_refresh() asks node n: connected ones first, failed ones last. */
static int
refresh_round(const struct rc_node *n)
{
	return n->ctx ? 0 : n->failed ? 2 : 1;
}

/*
 * The map from the first node that gives one, of RC_REFRESH_ASK asked at
 * most, within the command's deadline: connected nodes first (no connect
 * to wait for), then the seeds and the other nodes known, those whose
 * last connect or command failed last.  0, or -1 with c->why (the last
 * node's failure).
 */
static int
map_refresh(struct mkv_rc *c)
{
	unsigned asked = 0;
	struct rc_req q;

	req_slots(&q);
	for (unsigned i = 0; i < c->nnodes; i++)
		c->nodes[i].tried = false;
	for (int round = 0; round < 3; round++) {
		for (unsigned i = 0; i < c->nnodes; i++) {
			/* a node that fails is not tried again in this refresh */
			bool redone = true;
			redisReply *r;
			int rc;

			if (!c->nodes[i].used || c->nodes[i].tried || refresh_round(&c->nodes[i]) != round)
				continue;
			if (asked == RC_REFRESH_ASK)
				return -1;
			if (mkv_clock_now() >= c->deadline) {
				if (!asked)
					snprintf(c->why, sizeof(c->why), "redis: CLUSTER SLOTS: none of "
						"the %" PRIu32 " ms timeout left to ask", c->timeout_ms);
				return -1;
			}
			asked++;
			c->nodes[i].tried = true;
			if (exchange(c, i, &q, false, &redone, &r))
				continue;
			rc = map_read(c, i, r);
			freeReplyObject(r);
			if (rc == 0)
				return 0;
		}
	}
	return -1;
}

/* ---- commands ---- */

enum rc_kind { RC_OTHER, RC_MOVED, RC_ASK, RC_RETRY };

static enum rc_kind
error_kind(const char *s)
{
	if (strncmp(s, "MOVED ", 6) == 0)
		return RC_MOVED;
	if (strncmp(s, "ASK ", 4) == 0)
		return RC_ASK;
	if (strncmp(s, "TRYAGAIN", 8) == 0 || strncmp(s, "CLUSTERDOWN", 11) == 0)
		return RC_RETRY;
	return RC_OTHER;
}

/*
 * A redirect's "<slot> <host>:<port>" into its parts (host: RC_HOST_MAX + 1
 * bytes; empty when the node left it out: its own); 0 or -1.
 */
static int
redirect_parse(const char *s, unsigned *slot, char *host, int *port)
{
	const char *colon;
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	long p;

	if (end == s || *end != ' ' || v >= RC_SLOTS)
		return -1;
	s = end + 1;
	if (!(colon = strrchr(s, ':')) || (size_t)(colon - s) > RC_HOST_MAX)
		return -1;
	p = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end || p < 1 || p > 65535)
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	*slot = (unsigned)v;
	*port = (int)p;
	return 0;
}

/*
 * Request q for a key of slot slot, wherever the cluster has it: the reply
 * in *out (not an error reply) and the index of the node that gave it in
 * *from; 0, or -1 with c->why.
 */
static int
run(struct mkv_rc *c, unsigned slot, const struct rc_req *q, redisReply **out, unsigned *from)
{
	uint64_t deadline = mkv_clock_now() + (uint64_t)c->timeout_ms * 1000000ULL;
	bool redone = false, asking = false;

	c->deadline = deadline;
	int redirects = 0;
	unsigned i;

	/* no map, a slot it has no node for, a node that failed: the cluster may say better */
	if ((!c->mapped || c->owner[slot] == RC_NONE || c->nodes[c->owner[slot]].failed) &&
			map_refresh(c) && !c->mapped)
		return -1;
	if ((i = c->owner[slot]) == RC_NONE) {
		snprintf(c->why, sizeof(c->why), "redis: %s: no node serves slot %u", q->name, slot);
		return -1;
	}
	for (;;) {
		char host[RC_HOST_MAX + 1];
		unsigned to;
		uint64_t now;
		redisReply *r;
		enum rc_kind kind;
		int port, j;

		if (exchange(c, i, q, asking, &redone, &r))
			return -1;
		if (r->type != REDIS_REPLY_ERROR) {
			*out = r;
			*from = i;
			return 0;
		}
		kind = error_kind(r->str);
		/* tried again while a try has time left; else the node's refusal stands */
		if (kind == RC_RETRY && (now = mkv_clock_now()) + 2 * RC_RETRY_NS < deadline) {
			freeReplyObject(r);
			mkv_clock_sleep(RC_RETRY_NS);
			continue;
		}
		if (kind == RC_RETRY || kind == RC_OTHER) {
			node_fail(c, &c->nodes[i], "%s: %s", q->name, r->str);
			freeReplyObject(r);
			return -1;
		}
		if (redirect_parse(r->str + (kind == RC_ASK ? 4 : 6), &to, host, &port) ||
				++redirects > RC_REDIRECTS) {
			if (redirects > RC_REDIRECTS)
				node_fail(c, &c->nodes[i], "%s: %s, after %d redirects", q->name,
						r->str, RC_REDIRECTS);
			else
				node_fail(c, &c->nodes[i], "%s: %s: a redirect that does not parse",
						q->name, r->str);
			freeReplyObject(r);
			return -1;
		}
		freeReplyObject(r);
		if (!host[0])
			memcpy(host, c->nodes[i].host, sizeof(host));
		if (kind == RC_MOVED) {
			c->moved++;
			/* failing that, the old map and the slot's new node */
			map_refresh(c);
		} else {
			c->asked++;
		}
		if ((j = node_find(c, host, strlen(host), port)) < 0)
			return -1;
		if (kind == RC_MOVED)
			c->owner[to] = (uint16_t)j;
		i = (unsigned)j;
		asking = kind == RC_ASK;
	}
}

/* ---- the interface ---- */

/* Seed k, the len bytes "host:port" at s, into node k; 0 or MKV_E_INVAL. */
static int
seed_parse(struct mkv_rc *c, unsigned k, const char *s, size_t len)
{
	const char *colon = memrchr(s, ':', len);
	struct rc_node *n = &c->nodes[k];
	const char *why = NULL;
	unsigned long port = 0;

	if (len == 0)
		return mkv_err(MKV_E_INVAL, "mkv_rc_open: server %u is empty", k + 1);
	if (!colon)
		why = "no :port";
	else if (colon == s)
		why = "no host";
	else if ((size_t)(colon - s) > RC_HOST_MAX)
		why = "a host longer than 255 bytes";
	for (const char *h = s; !why && h < colon; h++)
		if ((unsigned char)*h <= ' ' || *h == 0x7f)
			why = "a space or control character in the host";
	for (size_t d = colon ? (size_t)(colon - s) + 1 : len; d < len && port <= 65535; d++)
		port = s[d] >= '0' && s[d] <= '9' ? port * 10 + (unsigned long)(s[d] - '0') : 65536;
	if (!why && (port < 1 || port > 65535))
		why = "a port that is not 1 to 65535";
	if (why)
		return mkv_err(MKV_E_INVAL, "mkv_rc_open: server %u \"%.*s%s\": %s", k + 1,
				len > 64 ? 64 : (int)len, s, len > 64 ? "..." : "", why);
	memcpy(n->host, s, (size_t)(colon - s));
	n->port = (int)port;
	n->used = true;
	n->seed = true;
	return 0;
}

int
mkv_rc_open(const char *servers, uint32_t timeout_ms, struct mkv_rc **out)
{
	struct mkv_rc *c;
	const char *p, *end;
	unsigned k = 0;
	int rc;

	mkv_err_clear();
	if (!out)
		return mkv_err(MKV_E_INVAL, "mkv_rc_open: out is NULL");
	*out = NULL;
	if (!servers)
		return mkv_err(MKV_E_INVAL, "mkv_rc_open: servers is NULL");
	if (timeout_ms == 0)
		return mkv_err(MKV_E_INVAL, "mkv_rc_open: a timeout of 0 ms");
	if (!(c = calloc(1, sizeof(*c))) || !(c->nodes = calloc(RC_SEEDS_MAX, sizeof(*c->nodes)))) {
		free(c);
		return mkv_err(MKV_E_NOMEM, "mkv_rc_open: out of memory");
	}
	c->cap = RC_SEEDS_MAX;
	c->timeout_ms = timeout_ms;
	c->cancel_fd = -1;
	for (p = servers;; p = end + 1) {
		end = strchr(p, ',');
		if (k == RC_SEEDS_MAX)
			rc = mkv_err(MKV_E_INVAL, "mkv_rc_open: more than %u servers", RC_SEEDS_MAX);
		else
			rc = seed_parse(c, k++, p, end ? (size_t)(end - p) : strlen(p));
		if (rc) {
			mkv_rc_close(c);
			return rc;
		}
		if (!end)
			break;
	}
	c->nnodes = k;
	for (unsigned s = 0; s < RC_SLOTS; s++)
		c->owner[s] = RC_NONE;
	*out = c;
	return 0;
}

void
mkv_rc_close(struct mkv_rc *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->nnodes; i++)
		node_drop(&c->nodes[i]);
	free(c->nodes);
	free(c);
}

void
mkv_rc_watch(struct mkv_rc *c, int fd)
{
	c->cancel_fd = fd;
}

int
mkv_rc_set(struct mkv_rc *c, const void *key, size_t klen, const struct iovec *iov, int iovcnt,
		uint32_t ttl_s)
{
	struct rc_req q;
	redisReply *r;
	size_t vlen = 0;
	unsigned from;
	bool ok;

	mkv_err_clear();
	if (!c || (!key && klen) || iovcnt < 0 || (!iov && iovcnt))
		return mkv_err(MKV_E_INVAL, "mkv_rc_set: NULL handle, key or iov, or iovcnt < 0");
	for (int k = 0; k < iovcnt; k++) {
		if ((!iov[k].iov_base && iov[k].iov_len) || vlen + iov[k].iov_len < vlen)
			return mkv_err(MKV_E_INVAL, "mkv_rc_set: iov[%d] is NULL or too long", k);
		vlen += iov[k].iov_len;
	}
	req_key(&q, "SET", key, klen, iov, (size_t)iovcnt, vlen, ttl_s);
	if (run(c, mkv_rc_slot(key, klen), &q, &r, &from))
		return rc_failed(c);
	ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
	if (!ok)
		node_fail(c, &c->nodes[from], "SET: %s reply, not OK", type_name(r->type));
	freeReplyObject(r);
	return ok ? 0 : rc_failed(c);
}

int
mkv_rc_get(struct mkv_rc *c, const void *key, size_t klen, size_t max, void **val, size_t *len)
{
	struct rc_req q;
	redisReply *r;
	unsigned from;
	int rc = 0;

	mkv_err_clear();
	if (!c || (!key && klen) || !val || !len)
		return mkv_err(MKV_E_INVAL, "mkv_rc_get: NULL handle, key, val or len");
	*val = NULL;
	*len = 0;
	req_key(&q, "GET", key, klen, NULL, 0, 0, 0);
	/* "$<max>\r\n", max bytes, "\r\n": a longer value takes more */
	q.limit = max + (size_t)snprintf(NULL, 0, "$%zu\r\n", max) + 2;
	if (run(c, mkv_rc_slot(key, klen), &q, &r, &from))
		return rc_failed(c);
	if (r->type == REDIS_REPLY_NIL) {
		rc = mkv_err(MKV_E_NOTFOUND, "redis %s:%d: GET: no such key", c->nodes[from].host,
				c->nodes[from].port);
	} else if (r->type != REDIS_REPLY_STRING) {
		node_fail(c, &c->nodes[from], "GET: %s reply", type_name(r->type));
		rc = rc_failed(c);
	} else if (!(*val = malloc(r->len ? r->len : 1))) {
		rc = mkv_err(MKV_E_NOMEM, "mkv_rc_get: no memory for a value of %zu bytes", r->len);
	} else {
		memcpy(*val, r->str, r->len);
		*len = r->len;
	}
	freeReplyObject(r);
	return rc;
}

int
mkv_rc_del(struct mkv_rc *c, const void *key, size_t klen)
{
	struct rc_req q;
	redisReply *r;
	unsigned from;
	bool ok;

	mkv_err_clear();
	if (!c || (!key && klen))
		return mkv_err(MKV_E_INVAL, "mkv_rc_del: NULL handle or key");
	req_key(&q, "DEL", key, klen, NULL, 0, 0, 0);
	if (run(c, mkv_rc_slot(key, klen), &q, &r, &from))
		return rc_failed(c);
	ok = r->type == REDIS_REPLY_INTEGER;
	if (!ok)
		node_fail(c, &c->nodes[from], "DEL: %s reply", type_name(r->type));
	freeReplyObject(r);
	return ok ? 0 : rc_failed(c);
}

const char *
mkv_rc_lasterror(const struct mkv_rc *c)
{
	return c ? c->lasterr : "";
}

unsigned long
mkv_rc_redirects(const struct mkv_rc *c, int ask)
{
	return !c ? 0 : ask ? c->asked : c->moved;
}
