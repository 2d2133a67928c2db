/* SPDX-License-Identifier: MIT */
/*
 * check_rcluster.c -- the Redis Cluster client (rcluster.c) against real
 * clusters: three redis-server processes on loopback, made a cluster by
 * redis-cli, a fresh one for each test (tests move slots and kill nodes).
 *
 * The slot function is checked against known values and against the
 * nodes' own CLUSTER KEYSLOT; values of every size and byte go round
 * through every node; slots are moved and migrated under the client with
 * the cluster's own commands, and each redirect path is counted; nodes
 * killed, stopped and serving no slot must fail in bounded time while the
 * others go on.  Without redis-server or redis-cli the suite is skipped
 * (77).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>

#include "testutil.h"
#include "rcluster.h"

#define NODES 3U
#define TIMEOUT_MS 2000U
#define MIB (1U << 20)
/* the longest value a GET here takes: more than the largest one set */
#define GET_MAX (128U * MIB)

static char servers[256];

static void
cluster_up(void)
{
	int rc = tu_cluster_start(tu_dir, NODES, servers, sizeof(servers));

	ck_assert_msg(rc == 0, "tu_cluster_start: %d", rc);
}

static void
rc_teardown(void)
{
	tu_cluster_stop();
	tu_teardown();
}

/* ---- talking to one node behind the client's back ---- */

/* A command to the node at port (printf's conversions only): its reply, asserted not to be an error. */
static redisReply *
node_vcmd(unsigned port, const char *fmt, va_list ap)
{
	struct timeval tv = { 5, 0 };
	redisContext *ctx = redisConnectWithTimeout("127.0.0.1", (int)port, tv);
	redisReply *r;

	ck_assert_msg(ctx && !ctx->err, "connect to %u: %s", port, ctx ? ctx->errstr : "no memory");
	ck_assert_int_eq(redisSetTimeout(ctx, tv), REDIS_OK);
	r = redisvCommand(ctx, fmt, ap);
	ck_assert_msg(r, "%s on %u: %s", fmt, port, ctx->errstr);
	ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s on %u: %s", fmt, port, r->str);
	redisFree(ctx);
	return r;
}

static redisReply *__attribute__((format(printf, 2, 3)))
node_cmd(unsigned port, const char *fmt, ...)
{
	redisReply *r;
	va_list ap;

	va_start(ap, fmt);
	r = node_vcmd(port, fmt, ap);
	va_end(ap);
	return r;
}

/* The same, for an integer reply. */
static long long __attribute__((format(printf, 2, 3)))
node_int(unsigned port, const char *fmt, ...)
{
	redisReply *r;
	long long v;
	va_list ap;

	va_start(ap, fmt);
	r = node_vcmd(port, fmt, ap);
	va_end(ap);
	ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s on %u: not an integer", fmt, port);
	v = r->integer;
	freeReplyObject(r);
	return v;
}

/* The node's id (CLUSTER MYID) into id (41 bytes). */
static void
node_id(unsigned port, char *id)
{
	redisReply *r = node_cmd(port, "CLUSTER MYID");

	ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
	ck_assert_uint_eq(r->len, 40);
	memcpy(id, r->str, 41);
	freeReplyObject(r);
}

/* The port of the node that serves slot, as node asked says (CLUSTER SLOTS). */
static unsigned
owner_port(unsigned asked, unsigned slot)
{
	redisReply *r = node_cmd(asked, "CLUSTER SLOTS");
	unsigned port = 0;

	for (size_t i = 0; i < r->elements; i++) {
		redisReply *e = r->element[i];

		if ((unsigned long long)e->element[0]->integer <= slot &&
				slot <= (unsigned long long)e->element[1]->integer)
			port = (unsigned)e->element[2]->element[1]->integer;
	}
	freeReplyObject(r);
	ck_assert_msg(port, "slot %u has no node", slot);
	return port;
}

/* Which of the nodes (0 .. NODES - 1) has this port. */
static unsigned
node_of(unsigned port)
{
	for (unsigned i = 0; i < NODES; i++)
		if (tu_cluster_port(i) == port)
			return i;
	ck_abort_msg("port %u is no node of ours", port);
	return 0;
}

/*
 * redis-cli -p port ARGS... (args NULL-terminated), its stdout into out
 * (NUL-terminated); its exit status.  A tool of Redis's own, apart from
 * hiredis and the client under test.
 */
static int
cli(unsigned port, char *out, size_t cap, ...)
{
	const char *argv[16] = { "redis-cli", "-p" };
	char p[16];
	int fds[2], a = 3;
	size_t n = 0;
	ssize_t r;
	va_list ap;
	pid_t pid;

	snprintf(p, sizeof(p), "%u", port);
	argv[2] = p;
	va_start(ap, cap);
	while (a < 15 && (argv[a] = va_arg(ap, const char *)))
		a++;
	va_end(ap);
	argv[a] = NULL;
	ck_assert_int_eq(pipe(fds), 0);
	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	while (n < cap - 1 && (r = read(fds[0], out + n, cap - 1 - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		ck_assert_int_gt(r, 0);
		n += (size_t)r;
	}
	out[n] = '\0';
	close(fds[0]);
	return tu_reap(pid, 10);
}

/* ---- values ---- */

/* Random bytes of seed, with a NUL and a CR LF in them when there is room. */
static void
fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t st = seed * 0x9E3779B97F4A7C15ULL + 1;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t r = tu_rand(&st);

		memcpy(buf + i, &r, 8);
	}
	for (; i < len; i++)
		buf[i] = (uint8_t)tu_rand(&st);
	if (len >= 4)
		memcpy(buf + len / 2, "\r\n\0", 3);
}

/* Set key to len bytes of seed, as one piece. */
static void
set_seeded(struct mkv_rc *c, const void *key, size_t klen, size_t len, uint64_t seed)
{
	uint8_t *v = malloc(len ? len : 1);
	struct iovec iov = { v, len };

	ck_assert_ptr_nonnull(v);
	fill(v, len, seed);
	TU_OK(mkv_rc_set(c, key, klen, &iov, 1, 0));
	free(v);
}

/* key must hold len bytes of seed, every one. */
static void
get_seeded(struct mkv_rc *c, const void *key, size_t klen, size_t len, uint64_t seed)
{
	uint8_t *want = malloc(len ? len : 1);
	void *got;
	size_t n;

	ck_assert_ptr_nonnull(want);
	fill(want, len, seed);
	TU_OK(mkv_rc_get(c, key, klen, GET_MAX, &got, &n));
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(n, len);
	ck_assert_msg(memcmp(got, want, len) == 0, "value of %zu bytes differs", len);
	free(got);
	free(want);
}

/* Key i of a set of binary keys: two bytes of i, then up to 38 of '{', '}', NUL, CR, LF or any. */
static size_t
bin_key(uint8_t *key, unsigned i)
{
	static const uint8_t odd[] = { '{', '}', '\0', '\r', '\n' };
	uint64_t st = i + 1000;
	size_t len = 2 + tu_rand_range(&st, 0, 38);

	key[0] = (uint8_t)i;
	key[1] = (uint8_t)(i >> 8);
	for (size_t k = 2; k < len; k++) {
		uint64_t r = tu_rand(&st);

		key[k] = r % 3 == 0 ? odd[(r >> 8) % sizeof(odd)] : (uint8_t)(r >> 16);
	}
	return len;
}

/* ---- the slot function ---- */

static unsigned
slot_of(const char *key)
{
	return mkv_rc_slot(key, strlen(key));
}

/*
 * CRC16 XMODEM's check value, Redis Cluster's examples, and the hash tag's
 * edge cases (the values are Python's binascii.crc_hqx(key, 0) % 16384).
 */
START_TEST(test_slot_known_values)
{
	ck_assert_uint_eq(slot_of("123456789"), 0x31C3);
	ck_assert_uint_eq(slot_of("123456789"), 12739);
	ck_assert_uint_eq(slot_of("foo"), 12182);
	ck_assert_uint_eq(slot_of("bar"), 5061);
	ck_assert_uint_eq(slot_of("user1000"), 3443);
	ck_assert_uint_eq(slot_of("{user1000}.following"), 3443);
	ck_assert_uint_eq(slot_of("{user1000}.followers"), 3443);
	/* an empty tag: the whole key */
	ck_assert_uint_eq(slot_of("foo{}{bar}"), 8363);
	ck_assert_uint_eq(slot_of("{}"), 15257);
	ck_assert_uint_eq(slot_of("foo{{bar}}zap"), 4015);
	ck_assert_uint_eq(slot_of("{bar"), 4015);
	ck_assert_uint_eq(slot_of("foo{bar}{zap}"), 5061);
	/* no '}' after the '{': the whole key */
	ck_assert_uint_eq(slot_of("a{b"), 13340);
	ck_assert_uint_eq(slot_of("}{x}"), slot_of("x"));
	ck_assert_uint_eq(slot_of("x"), 16287);
	ck_assert_uint_eq(mkv_rc_slot("", 0), 0);
	ck_assert_uint_eq(mkv_rc_slot(NULL, 0), 0);
	/* binary: the bytes, NULs and all */
	ck_assert_uint_ne(mkv_rc_slot("a\0b", 3), mkv_rc_slot("a\0c", 3));
	ck_assert_uint_eq(mkv_rc_slot("x{a\0b}y", 7), mkv_rc_slot("a\0b", 3));
}
END_TEST

/* The same keys, and random binary ones, as the nodes place them (CLUSTER KEYSLOT). */
START_TEST(test_slot_agrees_with_keyslot)
{
	static const char *const keys[] = {
		"123456789", "foo", "bar", "{user1000}.following", "{user1000}.followers",
		"user1000", "foo{}{bar}", "foo{{bar}}zap", "{bar", "foo{bar}{zap}", "", "}{x}", "{}",
	};
	struct timeval tv = { 5, 0 };
	redisContext *ctx;
	char out[64];

	cluster_up();
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		ck_assert_int_eq(cli(tu_cluster_port(i % NODES), out, sizeof(out), "CLUSTER", "KEYSLOT",
				keys[i], NULL), 0);
		ck_assert_msg(out[0] >= '0' && out[0] <= '9' && strtoul(out, NULL, 10) == slot_of(keys[i]),
				"\"%s\": redis-cli says %s, mkv_rc_slot %u", keys[i], out, slot_of(keys[i]));
	}
	ctx = redisConnectWithTimeout("127.0.0.1", (int)tu_cluster_port(0), tv);
	ck_assert(ctx && !ctx->err);
	for (unsigned i = 0; i < 2000; i++) {
		uint8_t key[64];
		size_t len = bin_key(key, i);
		redisReply *r = redisCommand(ctx, "CLUSTER KEYSLOT %b", key, len);

		ck_assert(r && r->type == REDIS_REPLY_INTEGER);
		ck_assert_uint_eq((unsigned long long)r->integer, mkv_rc_slot(key, len));
		freeReplyObject(r);
	}
	redisFree(ctx);
}
END_TEST

/* ---- values going round ---- */

#define NKEYS 2000U

static size_t
small_len(unsigned i)
{
	static const size_t lens[] = { 0, 1, 100, 64U << 10 };

	return lens[i % 4];
}

/*
 * 2000 binary keys with values of 0 to 64 KiB over every node, through a
 * list whose first seed is dead; read back whole, and again after every
 * node dropped its connections (each kept one is dead and made again).
 */
START_TEST(test_round_trip_many_keys)
{
	char list[512];
	struct mkv_rc *c;
	long long total = 0;
	uint8_t key[64];
	unsigned dead;

	cluster_up();
	dead = tu_cluster_port(0) + 7;
	ck_assert_int_ne(dead, tu_cluster_port(1));
	ck_assert_int_ne(dead, tu_cluster_port(2));
	snprintf(list, sizeof(list), "127.0.0.1:%u,%s", dead, servers);
	TU_OK(mkv_rc_open(list, TIMEOUT_MS, &c));
	for (unsigned i = 0; i < NKEYS; i++) {
		size_t klen = bin_key(key, i);

		set_seeded(c, key, klen, small_len(i), i);
	}
	set_seeded(c, "", 0, 777, 9999);
	for (unsigned i = 0; i < NKEYS; i++) {
		size_t klen = bin_key(key, i);

		get_seeded(c, key, klen, small_len(i), i);
	}
	get_seeded(c, "", 0, 777, 9999);
	/* every node holds some, and the keys are where the nodes looked for them */
	for (unsigned n = 0; n < NODES; n++) {
		long long keys = node_int(tu_cluster_port(n), "DBSIZE");

		ck_assert_int_gt(keys, 100);
		total += keys;
	}
	ck_assert_int_eq(total, NKEYS + 1);
	for (unsigned n = 0; n < NODES; n++)
		freeReplyObject(node_cmd(tu_cluster_port(n), "CLIENT KILL TYPE normal"));
	for (unsigned i = 0; i < NKEYS; i += 7) {
		size_t klen = bin_key(key, i);

		get_seeded(c, key, klen, small_len(i), i);
	}
	ck_assert_uint_eq(mkv_rc_redirects(c, 0), 0);
	ck_assert_uint_eq(mkv_rc_redirects(c, 1), 0);
	ck_assert_str_eq(mkv_rc_lasterror(c), "");
	mkv_rc_close(c);
}
END_TEST

/* 1, 32 and 64 MiB values in uneven pieces, and one of more pieces than a writev() takes. */
START_TEST(test_large_values)
{
	static const size_t sizes[] = { MIB, 32 * MIB, 64 * MIB + 3 };
	uint8_t *v = malloc(64 * MIB + 3);
	struct iovec iov[4], *many;
	struct mkv_rc *c;
	char key[32];

	ck_assert_ptr_nonnull(v);
	cluster_up();
	TU_OK(mkv_rc_open(servers, TIMEOUT_MS, &c));
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t len = sizes[s], a = len / 3 + 1, b = len / 5;

		fill(v, len, s + 1);
		iov[0] = (struct iovec){ v, a };
		iov[1] = (struct iovec){ NULL, 0 };
		iov[2] = (struct iovec){ v + a, b };
		iov[3] = (struct iovec){ v + a + b, len - a - b };
		snprintf(key, sizeof(key), "large.%zu", s);
		TU_OK(mkv_rc_set(c, key, strlen(key), iov, 4, 0));
		get_seeded(c, key, strlen(key), len, s + 1);
	}
	/* 3000 pieces of 7 bytes: several sendmsg() batches */
	many = calloc(3000, sizeof(*many));
	ck_assert_ptr_nonnull(many);
	fill(v, 3000 * 7, 77);
	for (unsigned i = 0; i < 3000; i++)
		many[i] = (struct iovec){ v + 7 * i, 7 };
	TU_OK(mkv_rc_set(c, "pieces", 6, many, 3000, 0));
	get_seeded(c, "pieces", 6, 3000 * 7, 77);
	free(many);
	free(v);
	mkv_rc_close(c);
}
END_TEST

/* Absent keys, DEL, a TTL that runs out, an error reply, bad arguments. */
START_TEST(test_absent_del_ttl_and_errors)
{
	struct mkv_rc *c;
	struct iovec iov = { "v", 1 };
	redisReply *r;
	long long ttl;
	void *val;
	size_t len;

	cluster_up();
	TU_OK(mkv_rc_open(servers, TIMEOUT_MS, &c));
	TU_ERR(mkv_rc_get(c, "absent", 6, GET_MAX, &val, &len), MKV_E_NOTFOUND);
	ck_assert_ptr_null(val);
	TU_OK(mkv_rc_del(c, "absent", 6));
	set_seeded(c, "gone", 4, 10, 1);
	TU_OK(mkv_rc_del(c, "gone", 4));
	TU_ERR(mkv_rc_get(c, "gone", 4, GET_MAX, &val, &len), MKV_E_NOTFOUND);

	/* EX as Redis reads it */
	TU_OK(mkv_rc_set(c, "lasting", 7, &iov, 1, 100));
	ttl = node_int(owner_port(tu_cluster_port(0), slot_of("lasting")), "TTL lasting");
	ck_assert_int_gt(ttl, 90);
	ck_assert_int_le(ttl, 100);
	TU_OK(mkv_rc_set(c, "brief", 5, &iov, 1, 1));
	TU_OK(mkv_rc_get(c, "brief", 5, GET_MAX, &val, &len));
	free(val);
	tu_sleep_ms(2500);
	TU_ERR(mkv_rc_get(c, "brief", 5, GET_MAX, &val, &len), MKV_E_NOTFOUND);
	TU_OK(mkv_rc_get(c, "lasting", 7, GET_MAX, &val, &len));
	free(val);

	/* a key of another type: an error reply */
	r = node_cmd(owner_port(tu_cluster_port(0), slot_of("alist")), "RPUSH alist x");
	freeReplyObject(r);
	TU_ERR(mkv_rc_get(c, "alist", 5, GET_MAX, &val, &len), MKV_E_REMOTE);
	ck_assert_msg(strstr(mkv_errormsg(), "WRONGTYPE"), "%s", mkv_errormsg());
	ck_assert_str_eq(mkv_rc_lasterror(c), mkv_errormsg());
	/* the last failure is kept, success clears the thread's message */
	TU_OK(mkv_rc_del(c, "alist", 5));
	ck_assert(strstr(mkv_rc_lasterror(c), "WRONGTYPE"));

	TU_ERR(mkv_rc_get(NULL, "k", 1, GET_MAX, &val, &len), MKV_E_INVAL);
	TU_ERR(mkv_rc_get(c, NULL, 1, GET_MAX, &val, &len), MKV_E_INVAL);
	TU_ERR(mkv_rc_get(c, "k", 1, GET_MAX, NULL, &len), MKV_E_INVAL);
	TU_ERR(mkv_rc_set(c, "k", 1, NULL, 1, 0), MKV_E_INVAL);
	TU_ERR(mkv_rc_set(c, "k", 1, &iov, -1, 0), MKV_E_INVAL);
	TU_ERR(mkv_rc_del(NULL, "k", 1), MKV_E_INVAL);
	mkv_rc_close(c);
	mkv_rc_close(NULL);
}
END_TEST

/* ---- slots moving ---- */

/* Slot's keys (up to 100) from src to dst (MIGRATE ... KEYS), all of them or the first n. */
static void
migrate_keys(unsigned src, unsigned dst, unsigned slot, size_t n)
{
	redisReply *keys = node_cmd(src, "CLUSTER GETKEYSINSLOT %u 100", slot);
	const char *argv[110] = { "MIGRATE", "127.0.0.1", NULL, "", "0", "5000", "KEYS" };
	size_t lens[110];
	char port[16];
	struct timeval tv = { 5, 0 };
	redisContext *ctx = redisConnectWithTimeout("127.0.0.1", (int)src, tv);
	redisReply *r;
	int argc = 7;

	ck_assert(ctx && !ctx->err);
	snprintf(port, sizeof(port), "%u", dst);
	argv[2] = port;
	for (size_t i = 0; i < keys->elements && i < n; i++)
		argv[argc++] = keys->element[i]->str;
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	ck_assert_int_gt(argc, 7);
	r = redisCommandArgv(ctx, argc, argv, lens);
	ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "MIGRATE: %s", r ? r->str : ctx->errstr);
	freeReplyObject(r);
	freeReplyObject(keys);
	redisFree(ctx);
}

/* Whether redis-cli finds key among slot's keys on the node at port (CLUSTER GETKEYSINSLOT). */
static int
node_has(unsigned port, unsigned slot, const char *key)
{
	char out[4096], s[16];
	char *line;

	snprintf(s, sizeof(s), "%u", slot);
	ck_assert_int_eq(cli(port, out, sizeof(out), "CLUSTER", "GETKEYSINSLOT", s, "1000", NULL), 0);
	for (line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
		if (strcmp(line, key) == 0)
			return 1;
	return 0;
}

/* The slot of tag, its node, and another node (and the third) for it to go to. */
struct reshard {
	unsigned slot, src, dst, other;
	char src_id[41], dst_id[41];
};

static void
move_plan(const char *tag, struct reshard *m)
{
	unsigned s;

	m->slot = slot_of(tag);
	m->src = owner_port(tu_cluster_port(0), m->slot);
	s = node_of(m->src);
	m->dst = tu_cluster_port((s + 1) % NODES);
	m->other = tu_cluster_port((s + 2) % NODES);
	node_id(m->src, m->src_id);
	node_id(m->dst, m->dst_id);
}

/*
 * Ten keys "{tag}i" of len0 + i bytes through c, then the slot put in
 * migration (IMPORTING on dst, MIGRATING on src) and n of them migrated.
 */
static void
migration_begun(struct mkv_rc *c, const char *tag, const struct reshard *m, size_t len0,
		size_t n)
{
	char key[32];

	for (unsigned i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "{%s}%u", tag, i);
		set_seeded(c, key, strlen(key), len0 + i, i);
	}
	freeReplyObject(node_cmd(m->dst, "CLUSTER SETSLOT %u IMPORTING %s", m->slot, m->src_id));
	freeReplyObject(node_cmd(m->src, "CLUSTER SETSLOT %u MIGRATING %s", m->slot, m->dst_id));
	migrate_keys(m->src, m->dst, m->slot, n);
}

/*
 * A slot moved for good (IMPORTING, MIGRATING, MIGRATE, SETSLOT NODE on
 * every node) under a client that knew the old map: one -MOVED, and the
 * map is right again for the rest.
 */
START_TEST(test_moved_after_reshard)
{
	struct mkv_rc *c;
	struct reshard m;
	char key[32];

	cluster_up();
	move_plan("mv", &m);
	TU_OK(mkv_rc_open(servers, TIMEOUT_MS, &c));
	migration_begun(c, "mv", &m, 1000, 100);
	freeReplyObject(node_cmd(m.dst, "CLUSTER SETSLOT %u NODE %s", m.slot, m.dst_id));
	freeReplyObject(node_cmd(m.src, "CLUSTER SETSLOT %u NODE %s", m.slot, m.dst_id));
	freeReplyObject(node_cmd(m.other, "CLUSTER SETSLOT %u NODE %s", m.slot, m.dst_id));
	ck_assert_uint_eq(owner_port(m.other, m.slot), m.dst);

	for (unsigned i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "{mv}%u", i);
		get_seeded(c, key, strlen(key), 1000 + i, i);
	}
	TU_OK(mkv_rc_set(c, "{mv}new", 7, &(struct iovec){ "new", 3 }, 1, 0));
	get_seeded(c, "{mv}0", 5, 1000, 0);
	ck_assert_uint_eq(mkv_rc_redirects(c, 0), 1);
	ck_assert_uint_eq(mkv_rc_redirects(c, 1), 0);
	ck_assert(node_has(m.dst, m.slot, "{mv}new"));
	ck_assert(node_has(m.dst, m.slot, "{mv}3"));
	ck_assert(!node_has(m.src, m.slot, "{mv}new"));
	ck_assert_int_eq(node_int(m.src, "CLUSTER COUNTKEYSINSLOT %u", m.slot), 0);
	mkv_rc_close(c);
}
END_TEST

/*
 * A slot half migrated (MIGRATING on its node, IMPORTING on the other,
 * some keys moved): keys moved are read through -ASK, every time (the map
 * stays); keys not moved from the source; a new key goes to the target
 * (the source asks it to), where redis-cli finds it.  Nodes that send a
 * key round between them: the client gives up after 5 redirects.
 */
START_TEST(test_ask_during_migration)
{
	unsigned long asked;
	struct mkv_rc *c;
	struct reshard m;
	char key[32];
	void *val;
	size_t len;

	cluster_up();
	move_plan("ak", &m);
	TU_OK(mkv_rc_open(servers, TIMEOUT_MS, &c));
	migration_begun(c, "ak", &m, 500, 5);
	ck_assert_int_eq(node_int(m.src, "CLUSTER COUNTKEYSINSLOT %u", m.slot), 5);

	for (unsigned i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "{ak}%u", i);
		get_seeded(c, key, strlen(key), 500 + i, i);
	}
	ck_assert_uint_eq(mkv_rc_redirects(c, 1), 5);
	/* again: the map still sends them to the source */
	for (unsigned i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "{ak}%u", i);
		get_seeded(c, key, strlen(key), 500 + i, i);
	}
	ck_assert_uint_eq(mkv_rc_redirects(c, 1), 10);

	TU_OK(mkv_rc_set(c, "{ak}new", 7, &(struct iovec){ "new", 3 }, 1, 0));
	ck_assert_uint_eq(mkv_rc_redirects(c, 1), 11);
	ck_assert(node_has(m.dst, m.slot, "{ak}new"));
	ck_assert(!node_has(m.src, m.slot, "{ak}new"));
	TU_OK(mkv_rc_get(c, "{ak}new", 7, GET_MAX, &val, &len));
	ck_assert_uint_eq(len, 3);
	ck_assert_int_eq(memcmp(val, "new", 3), 0);
	free(val);

	/* a key deleted on the target is absent through -ASK too */
	for (unsigned i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "{ak}%u", i);
		if (node_has(m.dst, m.slot, key)) {
			TU_OK(mkv_rc_del(c, key, strlen(key)));
			TU_ERR(mkv_rc_get(c, key, strlen(key), GET_MAX, &val, &len), MKV_E_NOTFOUND);
			break;
		}
	}
	ck_assert_uint_eq(mkv_rc_redirects(c, 0), 0);

	/* the target importing no more: it answers the source's -ASK with -MOVED back, for ever */
	freeReplyObject(node_cmd(m.dst, "CLUSTER SETSLOT %u STABLE", m.slot));
	asked = mkv_rc_redirects(c, 1);
	TU_ERR(mkv_rc_get(c, "{ak}nowhere", 11, GET_MAX, &val, &len), MKV_E_REMOTE);
	ck_assert_msg(strstr(mkv_errormsg(), "after 5 redirects"), "%s", mkv_errormsg());
	ck_assert_uint_eq(mkv_rc_redirects(c, 1) - asked, 3);
	ck_assert_uint_eq(mkv_rc_redirects(c, 0), 2);
	mkv_rc_close(c);
}
END_TEST

/* ---- nodes failing ---- */

#define NSPREAD 300U

/* Keys "k<i>" spread over the nodes: each one's node index, into node[NSPREAD]. */
static void
spread(struct mkv_rc *c, unsigned *node)
{
	char key[32];

	for (unsigned i = 0; i < NSPREAD; i++) {
		snprintf(key, sizeof(key), "k%u", i);
		node[i] = node_of(owner_port(tu_cluster_port(0), slot_of(key)));
		set_seeded(c, key, strlen(key), 64, i);
	}
}

/*
 * Check the keys: five of node gone fail with MKV_E_REMOTE naming it,
 * each within limit seconds (the slowest into *worst); the others read
 * back.
 */
static void
check_spread(struct mkv_rc *c, const unsigned *node, unsigned gone, double limit, double *worst)
{
	char key[32], port[16];
	unsigned failed = 0;
	void *val;
	size_t len;

	snprintf(port, sizeof(port), ":%u", tu_cluster_port(gone));
	for (unsigned i = 0; i < NSPREAD; i += 3) {
		snprintf(key, sizeof(key), "k%u", i);
		if (node[i] == gone && failed < 5) {
			double t = tu_now();

			TU_ERR(mkv_rc_get(c, key, strlen(key), GET_MAX, &val, &len), MKV_E_REMOTE);
			t = tu_now() - t;
			*worst = t > *worst ? t : *worst;
			ck_assert_msg(t < limit, "GET of a dead node's key took %.3f s", t);
			ck_assert_msg(strstr(mkv_errormsg(), port), "%s", mkv_errormsg());
			failed++;
		} else if (node[i] != gone) {
			get_seeded(c, key, strlen(key), 64, i);
		}
	}
	ck_assert_uint_eq(failed, 5);
}

/* The other nodes' view of node i has the flag "fail" (CLUSTER NODES). */
static int
seen_failed(unsigned i, unsigned asked)
{
	redisReply *r = node_cmd(tu_cluster_port(asked), "CLUSTER NODES");
	char addr[32], *line;
	int fail = 0;

	snprintf(addr, sizeof(addr), " 127.0.0.1:%u@", tu_cluster_port(i));
	line = strstr(r->str, addr);
	ck_assert_ptr_nonnull(line);
	fail = strncmp(strchr(line + 1, ' '), " master,fail ", 13) == 0;
	freeReplyObject(r);
	return fail;
}

/*
 * A node killed (SIGKILL): its keys fail at once (nothing listens), a
 * large SET into the connection kept to it too (EPIPE, not SIGPIPE); the
 * other nodes' keys go on, also once the cluster has marked it failed;
 * and a slot of it given to another node (what a failover does) is found
 * there.
 */
START_TEST(test_killed_node_fails_fast)
{
	const uint32_t timeout = 500;
	unsigned node[NSPREAD], dead = 2, first = 0, slot;
	struct iovec big = { calloc(1, 8 * MIB), 8 * MIB };
	double worst = 0, t;
	struct mkv_rc *c;
	char key[32], id[41];
	void *val;
	size_t len;

	ck_assert_ptr_nonnull(big.iov_base);
	cluster_up();
	TU_OK(mkv_rc_open(servers, timeout, &c));
	spread(c, node);
	while (node[first] != dead)
		first++;
	snprintf(key, sizeof(key), "k%u", first);
	ck_assert_int_eq(kill(tu_cluster_pid(dead), SIGKILL), 0);
	/* gone, its sockets closed: the kept connection has had its FIN */
	ck_assert_int_eq(tu_wait(tu_cluster_pid(dead)), 128 + SIGKILL);
	t = tu_now();
	TU_ERR(mkv_rc_set(c, key, strlen(key), &big, 1, 0), MKV_E_REMOTE);
	t = tu_now() - t;
	ck_assert_msg(t < 2.0 * timeout / 1000, "SET to a dead node took %.3f s", t);
	check_spread(c, node, dead, 2.0 * timeout / 1000, &worst);
	ck_assert_msg(TU_UNTIL(seen_failed(dead, 0) && seen_failed(dead, 1), 15.0),
			"the cluster did not mark node %u failed", dead);
	check_spread(c, node, dead, 2.0 * timeout / 1000, &worst);
	ck_assert_msg(strstr(mkv_rc_lasterror(c), "Connection refused"), "%s", mkv_rc_lasterror(c));

	slot = slot_of(key);
	node_id(tu_cluster_port(0), id);
	freeReplyObject(node_cmd(tu_cluster_port(0), "CLUSTER SETSLOT %u NODE %s", slot, id));
	freeReplyObject(node_cmd(tu_cluster_port(1), "CLUSTER SETSLOT %u NODE %s", slot, id));
	TU_OK(mkv_rc_set(c, key, strlen(key), &big, 1, 0));
	ck_assert(node_has(tu_cluster_port(0), slot, key));
	TU_OK(mkv_rc_get(c, key, strlen(key), GET_MAX, &val, &len));
	ck_assert_uint_eq(len, 8 * MIB);
	ck_assert(tu_is_zero(val, len));
	free(val);
	free(big.iov_base);
	mkv_rc_close(c);
}
END_TEST

/*
 * A node stopped (SIGSTOP: connections are accepted, nothing answers):
 * each GET of its keys fails after about the timeout, no more than twice
 * it; the other nodes' keys go on.
 */
START_TEST(test_stopped_node_times_out)
{
	const uint32_t timeout = 400;
	unsigned node[NSPREAD], stopped = 1;
	double worst = 0;
	struct mkv_rc *c;
	char key[32];
	void *val;
	size_t len;

	cluster_up();
	TU_OK(mkv_rc_open(servers, timeout, &c));
	spread(c, node);
	ck_assert_int_eq(kill(tu_cluster_pid(stopped), SIGSTOP), 0);
	check_spread(c, node, stopped, 2.0 * timeout / 1000, &worst);
	ck_assert_msg(worst > 0.9 * timeout / 1000, "a GET failed after %.3f s", worst);
	ck_assert_msg(strstr(mkv_rc_lasterror(c), "no answer within the 400 ms timeout"), "%s",
			mkv_rc_lasterror(c));
	/* and it answers again once it runs */
	ck_assert_int_eq(kill(tu_cluster_pid(stopped), SIGCONT), 0);
	for (unsigned i = 0; i < NSPREAD; i++)
		if (node[i] == stopped) {
			snprintf(key, sizeof(key), "k%u", i);
			ck_assert(TU_UNTIL(mkv_rc_get(c, key, strlen(key), GET_MAX, &val, &len) == 0, 10.0));
			free(val);
			get_seeded(c, key, strlen(key), 64, i);
			break;
		}
	mkv_rc_close(c);
}
END_TEST

/*
 * A slot its node stops serving (CLUSTER DELSLOTS): -CLUSTERDOWN, tried
 * again until the timeout, then MKV_E_REMOTE; served again within the
 * timeout (ADDSLOTS from a child), the command goes through.
 */
START_TEST(test_clusterdown_retried_until_timeout)
{
	const uint32_t timeout = 1000;
	unsigned slot = slot_of("cd"), port;
	struct mkv_rc *c;
	void *val;
	size_t len;
	double t;
	pid_t child;

	cluster_up();
	port = owner_port(tu_cluster_port(0), slot);
	TU_OK(mkv_rc_open(servers, timeout, &c));
	set_seeded(c, "{cd}a", 5, 10, 1);
	freeReplyObject(node_cmd(port, "CLUSTER DELSLOTS %u", slot));
	t = tu_now();
	TU_ERR(mkv_rc_get(c, "{cd}a", 5, GET_MAX, &val, &len), MKV_E_REMOTE);
	t = tu_now() - t;
	ck_assert_msg(strstr(mkv_errormsg(), "CLUSTERDOWN"), "%s", mkv_errormsg());
	ck_assert_msg(t >= 0.9 && t < 2.0, "gave up after %.3f s", t);

	child = tu_fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		tu_sleep_ms(300);
		freeReplyObject(node_cmd(port, "CLUSTER ADDSLOTS %u", slot));
		_exit(0);
	}
	t = tu_now();
	TU_OK(mkv_rc_set(c, "{cd}b", 5, &(struct iovec){ "b", 1 }, 1, 0));
	t = tu_now() - t;
	ck_assert_int_eq(tu_reap(child, 10), 0);
	ck_assert_msg(t >= 0.25 && t < 1.0, "served after %.3f s", t);
	get_seeded(c, "{cd}a", 5, 10, 1);
	mkv_rc_close(c);
}
END_TEST

/* ---- no cluster ---- */

/* Lists that name no server, or a bad one: MKV_E_INVAL naming the part; good ones open. */
START_TEST(test_open_rejects_bad_lists)
{
	static const struct {
		const char *list, *says;
	} bad[] = {
		{ "", "server 1 is empty" },
		{ "host", "no :port" },
		{ "host:0", "1 to 65535" },
		{ "host:99999", "1 to 65535" },
		{ "host:65536", "1 to 65535" },
		{ "host:", "1 to 65535" },
		{ "host:-1", "1 to 65535" },
		{ "host:80x", "1 to 65535" },
		{ ":6379", "no host" },
		{ "a b:1", "space" },
		{ "a:1,", "server 2 is empty" },
		{ "a:1,,b:2", "server 2 is empty" },
		{ "a:1,b:2,c", "server 3" },
	};
	char list[1024], *p;
	struct mkv_rc *c = (struct mkv_rc *)&c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		TU_ERR(mkv_rc_open(bad[i].list, 100, &c), MKV_E_INVAL);
		ck_assert_ptr_null(c);
		ck_assert_msg(strstr(mkv_errormsg(), bad[i].says), "\"%s\": %s", bad[i].list,
				mkv_errormsg());
	}
	/* hosts of 255 bytes, not 256 */
	memset(list, 'h', 300);
	strcpy(list + 300, ":1");
	TU_ERR(mkv_rc_open(list, 100, &c), MKV_E_INVAL);
	ck_assert(strstr(mkv_errormsg(), "longer than 255"));
	strcpy(list + 256, ":1");
	TU_ERR(mkv_rc_open(list, 100, &c), MKV_E_INVAL);
	strcpy(list + 255, ":1");
	TU_OK(mkv_rc_open(list, 100, &c));
	mkv_rc_close(c);
	/* 16 servers, not 17 */
	p = list;
	for (unsigned i = 0; i < 16; i++)
		p += sprintf(p, "%s127.0.0.1:%u", i ? "," : "", 1000 + i);
	TU_OK(mkv_rc_open(list, 100, &c));
	mkv_rc_close(c);
	strcat(list, ",x:1");
	TU_ERR(mkv_rc_open(list, 100, &c), MKV_E_INVAL);
	ck_assert(strstr(mkv_errormsg(), "more than 16"));

	TU_ERR(mkv_rc_open("a:1", 0, &c), MKV_E_INVAL);
	TU_ERR(mkv_rc_open(NULL, 100, &c), MKV_E_INVAL);
	TU_ERR(mkv_rc_open("a:1", 100, NULL), MKV_E_INVAL);
	TU_OK(mkv_rc_open("::1:6379,localhost:65535", 100, &c));
	ck_assert_str_eq(mkv_rc_lasterror(c), "");
	mkv_rc_close(c);
}
END_TEST

/* A port nothing listens on: MKV_E_REMOTE at once, saying so. */
START_TEST(test_nothing_listening_fails_fast)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct mkv_rc *c;
	char list[64];
	void *val;
	size_t len;
	double t;

	/* a port the kernel just gave out, free again */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	close(fd);
	snprintf(list, sizeof(list), "127.0.0.1:%u,127.0.0.1:%u", ntohs(a.sin_port), ntohs(a.sin_port));
	TU_OK(mkv_rc_open(list, TIMEOUT_MS, &c));
	t = tu_now();
	TU_ERR(mkv_rc_get(c, "k", 1, GET_MAX, &val, &len), MKV_E_REMOTE);
	TU_ERR(mkv_rc_set(c, "k", 1, &(struct iovec){ "v", 1 }, 1, 0), MKV_E_REMOTE);
	TU_ERR(mkv_rc_del(c, "k", 1), MKV_E_REMOTE);
	t = tu_now() - t;
	ck_assert_msg(t < 0.5, "three refusals took %.3f s", t);
	ck_assert_msg(strstr(mkv_errormsg(), "Connection refused"), "%s", mkv_errormsg());
	ck_assert_str_eq(mkv_rc_lasterror(c), mkv_errormsg());
	mkv_rc_close(c);
}
END_TEST

/* A Redis without cluster support: CLUSTER SLOTS fails, and the message says it. */
START_TEST(test_standalone_server_is_remote_error)
{
	struct mkv_rc *c;
	unsigned port;
	char list[64];
	void *val;
	size_t len;

	ck_assert_int_eq(tu_redis_standalone(tu_dir, &port), 0);
	snprintf(list, sizeof(list), "127.0.0.1:%u", port);
	TU_OK(mkv_rc_open(list, TIMEOUT_MS, &c));
	TU_ERR(mkv_rc_get(c, "k", 1, GET_MAX, &val, &len), MKV_E_REMOTE);
	ck_assert_msg(strstr(mkv_errormsg(), "CLUSTER SLOTS") &&
			strstr(mkv_errormsg(), "cluster support disabled"), "%s", mkv_errormsg());
	TU_ERR(mkv_rc_set(c, "k", 1, &(struct iovec){ "v", 1 }, 1, 0), MKV_E_REMOTE);
	mkv_rc_close(c);
}
END_TEST

static Suite *
rcluster_suite(void)
{
	Suite *s = suite_create("rcluster");
	TCase *tc = tcase_create("cluster");

	tcase_add_checked_fixture(tc, tu_setup, rc_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_slot_known_values);
	tcase_add_test(tc, test_slot_agrees_with_keyslot);
	tcase_add_test(tc, test_round_trip_many_keys);
	tcase_add_test(tc, test_large_values);
	tcase_add_test(tc, test_absent_del_ttl_and_errors);
	tcase_add_test(tc, test_moved_after_reshard);
	tcase_add_test(tc, test_ask_during_migration);
	tcase_add_test(tc, test_killed_node_fails_fast);
	tcase_add_test(tc, test_stopped_node_times_out);
	tcase_add_test(tc, test_clusterdown_retried_until_timeout);
	tcase_add_test(tc, test_open_rejects_bad_lists);
	tcase_add_test(tc, test_nothing_listening_fails_fast);
	tcase_add_test(tc, test_standalone_server_is_remote_error);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	if (!tu_on_path("redis-server") || !tu_on_path("redis-cli")) {
		fprintf(stderr, "check_rcluster: redis-server or redis-cli not on PATH, skipped\n");
		return 77;
	}
	return tu_run_suite(rcluster_suite());
}
