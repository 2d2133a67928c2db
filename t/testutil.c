/* SPDX-License-Identifier: MIT */
/*
 * testutil.c -- temporary pools, patterns and process helpers for t/.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"

#define TU_ROOT_ENV "MKV_TEST_TMPROOT"

char *tu_dir;
char *tu_path;

/* ---- temporary directories ---- */

char *
tu_tmpdir_new(void)
{
	const char *root = getenv(TU_ROOT_ENV);
	char *path;

	if (root == NULL || root[0] == '\0')
		root = "/dev/shm";
	if (asprintf(&path, "%s/mkvt.XXXXXX", root) < 0)
		return NULL;
	if (mkdtemp(path) == NULL) {
		free(path);
		return NULL;
	}
	return path;
}

static int
rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb, (void)ftw;
	if (type == FTW_DP || type == FTW_D)
		return rmdir(path) < 0 ? -errno : 0;
	return unlink(path) < 0 ? -errno : 0;
}

int
tu_rmtree(const char *path)
{
	int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);

	if (rc < 0)
		return errno ? -errno : -EIO;
	return rc;
}

void
tu_tmpdir_free(char **dir)
{
	if (dir == NULL || *dir == NULL)
		return;
	(void)tu_rmtree(*dir);
	free(*dir);
	*dir = NULL;
}

/* "<dir>/<name>" in a malloc'd string. */
static char *
path_in(const char *dir, const char *name)
{
	char *path;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return NULL;
	return path;
}

char *
tu_pool_path(const char *dir)
{
	return path_in(dir, "pool");
}

/* The memory model of the pools the tests create: $TU_COHERENCE, "noncoherent" or not. */
enum mkv_coherence
tu_coherence(void)
{
	const char *c = getenv("TU_COHERENCE");

	return c && strcmp(c, "noncoherent") == 0 ? MKV_NONCOHERENT : MKV_COHERENT;
}

/*
 * The node table's size: as asked, else the library's default, but for a
 * non-coherent pool, which gives each node max_clients / max_nodes slots:
 * there two nodes, each with half of them, or one node with all of a
 * handful.
 */
static enum mkv_coherence
tu_opts_coherence(const struct tu_opts *o)
{
	return o->coherence ? o->coherence : tu_coherence();
}

static uint32_t
tu_max_nodes(const struct tu_opts *o, uint32_t max_clients)
{
	if (o->max_nodes)
		return o->max_nodes;
	if (tu_opts_coherence(o) != MKV_NONCOHERENT)
		return MKV_DEFAULT_MAX_NODES;
	return max_clients < 4 ? 1 : 2;
}

int
tu_open(const char *path, unsigned flags, const struct tu_opts *o, struct mkv_pool **pool)
{
	struct mkv_opts *opts = NULL;
	uint32_t max_clients;
	int rc;

	*pool = NULL;
	if (o == NULL)
		return mkv_pool_open(path, flags, NULL, pool);
	max_clients = o->max_clients ? o->max_clients : 16;
	if (o->host && setenv("MARUKV_BOOT_ID", o->host, 1) < 0)
		return -errno;
	if ((rc = mkv_opts_new(&opts)) < 0)
		return rc;
	if ((rc = mkv_opts_set_page_size(opts, o->page_size ? o->page_size : TU_PAGE_SIZE)) < 0 ||
	    (rc = mkv_opts_set_data_size(opts, o->data_size ? o->data_size : TU_DATA_SIZE)) < 0 ||
	    (rc = mkv_opts_set_max_clients(opts, max_clients)) < 0 ||
	    (rc = mkv_opts_set_watermarks(opts, 0, 0)) < 0 ||
	    (o->node && (rc = mkv_opts_set_node(opts, o->node)) < 0) ||
	    (o->lease_ms && (rc = mkv_opts_set_lease_period(opts, o->lease_ms)) < 0) ||
	    (o->client_timeout_ms &&
	     (rc = mkv_opts_set_client_timeout(opts, o->client_timeout_ms)) < 0) ||
	    (rc = mkv_opts_set_max_nodes(opts, tu_max_nodes(o, max_clients))) < 0 ||
	    (o->registry_size && (rc = mkv_opts_set_registry_size(opts, o->registry_size)) < 0) ||
	    (rc = mkv_opts_set_coherence(opts, tu_opts_coherence(o))) < 0) {
		mkv_opts_delete(&opts);
		return rc;
	}
	rc = mkv_pool_open(path, flags, opts, pool);
	mkv_opts_delete(&opts);
	return rc;
}

/* tu_open() of <dir>/pool. */
static int
open_in(const char *dir, unsigned flags, const struct tu_opts *o, struct mkv_pool **pool)
{
	char *path = tu_pool_path(dir);
	int rc;

	*pool = NULL;
	if (path == NULL)
		return -ENOMEM;
	rc = tu_open(path, flags, o, pool);
	free(path);
	return rc;
}

int
tu_pool_create(const char *dir, uint64_t data_size, uint32_t page_size,
		uint32_t max_clients, struct mkv_pool **pool)
{
	struct tu_opts o = { .data_size = data_size, .page_size = page_size,
			.max_clients = max_clients };

	return open_in(dir, MKV_CREATE, &o, pool);
}

int
tu_pool_open(const char *dir, unsigned flags, struct mkv_pool **pool)
{
	return open_in(dir, flags, NULL, pool);
}

char *
tu_lockdir(const char *base, struct mkv_pool *pool)
{
	struct mkv_stat st;
	const uint8_t *u = st.uuid;
	char *path;

	tu_stat(pool, &st);
	ck_assert_int_gt(asprintf(&path,
			"%s/marukv-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			base, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
			u[11], u[12], u[13], u[14], u[15]), 0);
	return path;
}

char *
tu_registry_name(struct mkv_pool *pool)
{
	struct mkv_stat st;
	char *dir, *name;

	tu_stat(pool, &st);
	dir = st.coherence == MKV_NONCOHERENT ? tu_lockdir(getenv("MARUKV_LOCK_DIR"), pool) :
			strdup(mkv_pool_path(pool));
	ck_assert_ptr_nonnull(dir);
	ck_assert_int_gt(asprintf(&name, "%s/registry.mdb", dir), 0);
	free(dir);
	return name;
}

/* ---- numbers and patterns ---- */

uint64_t
tu_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t
tu_rand(uint64_t *state)
{
	uint64_t x = *state;

	if (x == 0)
		x = 0x2545f4914f6cdd1dULL;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

uint64_t
tu_rand_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
	return lo + tu_rand(state) % (hi - lo + 1);
}

uint64_t
tu_fnv1a(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t
tu_hash(const void *p, size_t n)
{
	uint64_t h = tu_fnv1a(p, n) ^ n;

	return tu_splitmix64(&h);
}

void
tu_fill(void *buf, size_t len, const void *key, size_t klen)
{
	unsigned char *b = buf;
	uint64_t s = tu_hash(key, klen), w;
	size_t off;

	for (off = 0; off < len; off += 8) {
		w = tu_splitmix64(&s);
		memcpy(b + off, &w, len - off < 8 ? len - off : 8);
	}
}

ssize_t
tu_verify(const void *buf, size_t len, const void *key, size_t klen)
{
	const unsigned char *b = buf;
	uint64_t s = tu_hash(key, klen), w;
	size_t off, i, n;

	for (off = 0; off < len; off += 8) {
		w = tu_splitmix64(&s);
		n = len - off < 8 ? len - off : 8;
		if (memcmp(b + off, &w, n) != 0) {
			for (i = 0; i < n; i++)
				if (b[off + i] != ((const unsigned char *)&w)[i])
					return (ssize_t)(off + i);
		}
	}
	return -1;
}

size_t
tu_vlen(const void *key, size_t klen, size_t lo, size_t hi)
{
	uint64_t s = tu_hash(key, klen) ^ 0x5bd1e995ULL;

	return lo + (size_t)(tu_splitmix64(&s) % (hi - lo + 1));
}

size_t
tu_key(char *out, const char *prefix, unsigned i)
{
	int n = snprintf(out, 64, "%s%08u", prefix, i);

	return n < 0 ? 0 : (size_t)n;
}

void
tu_chain_key(const uint8_t *prev, uint64_t i, uint8_t out[32])
{
	uint64_t s, w;
	int k;

	s = (prev ? tu_hash(prev, 32) : 0x6d61727563686169ULL) ^ (i * 0x9e3779b97f4a7c15ULL);
	for (k = 0; k < 4; k++) {
		w = tu_splitmix64(&s);
		memcpy(out + 8 * k, &w, 8);
	}
}

void
tu_chain_keys(uint8_t (*keys)[32], size_t n, uint64_t seed)
{
	uint8_t first[32];
	size_t i;

	memset(first, 0, sizeof(first));
	memcpy(first, &seed, sizeof(seed));
	for (i = 0; i < n; i++)
		tu_chain_key(i == 0 ? first : keys[i - 1], i, keys[i]);
}

/* ---- values through the library ---- */

int
tu_put(struct mkv_pool *pool, const void *key, size_t klen, size_t len)
{
	void *v = malloc(len ? len : 1);
	int rc;

	if (v == NULL)
		return -ENOMEM;
	tu_fill(v, len, key, klen);
	rc = mkv_put(pool, key, klen, v, len);
	free(v);
	return rc;
}

/* A buffer of @p len bytes filled with the pattern of @p key; the mkv_alloc() code. */
static int
alloc_fill(struct mkv_pool *pool, const void *key, size_t klen, size_t len, struct mkv_buf *buf)
{
	int rc;

	memset(buf, 0, sizeof(*buf));
	if ((rc = mkv_alloc(pool, len, buf)) < 0 || buf->data == NULL || buf->len < len)
		return rc;
	tu_fill(buf->data, len, key, klen);
	return 0;
}

int
tu_publish(struct mkv_pool *pool, const void *key, size_t klen, size_t len)
{
	struct mkv_buf buf;
	int rc;

	if ((rc = alloc_fill(pool, key, klen, len, &buf)) < 0)
		return rc;
	if (buf.data == NULL || buf.len < len) {
		(void)mkv_abort(pool, &buf);
		return -EFAULT;
	}
	rc = mkv_publish(pool, key, klen, &buf);
	if (rc < 0 && rc != MKV_E_EXISTS)
		(void)mkv_abort(pool, &buf);
	return rc;
}

char tu_write_msg[256];

int
tu_write(struct mkv_pool *pool, const char *key, size_t klen, size_t len, enum tu_way way,
		int *nomsg)
{
	static const char *const what[] = { "put", "publish", "publish_async/wait" };
	struct mkv_ticket t;
	struct mkv_buf b;
	int rc;

	tu_write_msg[0] = '\0';
	if (way == TU_WAY_PUT) {
		rc = tu_put(pool, key, klen, len);
	} else if ((rc = alloc_fill(pool, key, klen, len, &b)) < 0) {
		if (mkv_errormsg()[0] == '\0')
			(*nomsg)++;
		snprintf(tu_write_msg, sizeof(tu_write_msg), "alloc for %s: %s", key,
				mkv_errormsg());
		return rc;
	} else if (b.data == NULL || b.len < len) {
		/* a broken promise of the API is not a "clean failure": end the child */
		_exit(tu_fail(120, "alloc(%zu) for %s returned data %p len %zu", len, key,
				b.data, b.len));
	} else if (way == TU_WAY_PUBLISH) {
		rc = mkv_publish(pool, key, klen, &b);
		if ((rc == 0 || rc == MKV_E_EXISTS) && !tu_is_zero(&b, sizeof(b)))
			_exit(tu_fail(121, "publish %s = %d left the buffer", key, rc));
	} else {
		rc = mkv_publish_async(pool, key, klen, &b, &t);
		if (rc == 0) {
			if (!tu_is_zero(&b, sizeof(b)))
				_exit(tu_fail(122, "publish_async %s left the buffer", key));
			rc = mkv_wait(pool, &t);
		}
	}
	if (rc < 0) {
		if (mkv_errormsg()[0] == '\0')
			(*nomsg)++;
		snprintf(tu_write_msg, sizeof(tu_write_msg), "%s %s: %s", what[way], key,
				mkv_errormsg());
		if (way != TU_WAY_PUT && rc != MKV_E_EXISTS && b.data != NULL)
			(void)mkv_abort(pool, &b);
	}
	return rc;
}

int
tu_check(struct mkv_pool *pool, const void *key, size_t klen, size_t len)
{
	struct mkv_view v;
	int rc, bad = 0;

	memset(&v, 0, sizeof(v));
	rc = mkv_get(pool, key, klen, &v);
	if (rc < 0)
		return rc;
	if (len != (size_t)-1 && v.len != len)
		bad = 1;
	else if (v.data == NULL || tu_verify(v.data, v.len, key, klen) != -1)
		bad = 2;
	if (mkv_release(pool, &v) != 0 && !bad)
		bad = 3;
	return bad;
}

void
tu_stat(struct mkv_pool *pool, struct mkv_stat *st)
{
	int rc;

	memset(st, 0xa5, sizeof(*st));
	rc = mkv_pool_stat(pool, st);
	ck_assert_msg(rc == 0, "mkv_pool_stat = %d (%s): %s", rc, mkv_strerror(rc),
			mkv_errormsg());
	ck_assert_msg(mkv_errormsg()[0] == '\0', "mkv_pool_stat: errormsg \"%s\"",
			mkv_errormsg());
	ck_assert_msg(st->pages_used + st->pages_free + st->pages_quarantined +
			st->pages_granted == st->pages_total,
			"page counts do not add up: used %llu free %llu quarantined %llu "
			"granted %llu total %llu",
			(unsigned long long)st->pages_used, (unsigned long long)st->pages_free,
			(unsigned long long)st->pages_quarantined,
			(unsigned long long)st->pages_granted,
			(unsigned long long)st->pages_total);
}

ssize_t
tu_view_damage(const struct mkv_view *v, const void *key, size_t klen, size_t len)
{
	if (v->data == NULL || v->len != len)
		return 0;
	return tu_verify(v->data, v->len, key, klen);
}

void
tu_verify_clean(struct mkv_pool *pool, unsigned flags, struct mkv_verify *rep, const char *ctx)
{
	struct mkv_verify own;
	int rc;

	if (rep == NULL)
		rep = &own;
	memset(rep, 0xa5, sizeof(*rep));
	rc = mkv_pool_verify(pool, flags, rep);
	ck_assert_msg(rc == 0, "%s: mkv_pool_verify(0x%x) = %d (%s), problems %llu, first: "
			"\"%.200s\" (%s)", ctx, flags, rc, mkv_strerror(rc),
			(unsigned long long)rep->problems,
			rc == MKV_E_CORRUPT ? rep->first_problem : "", mkv_errormsg());
	ck_assert_msg(rep->problems == 0 && rep->first_problem[0] == '\0',
			"%s: verify returned 0 with problems %llu \"%s\"", ctx,
			(unsigned long long)rep->problems, rep->first_problem);
}

uint64_t
tu_drain_pending(struct mkv_pool *pool, double secs)
{
	struct mkv_stat st;
	double end = tu_now() + secs;

	for (;;) {
		tu_stat(pool, &st);
		if (st.requests_pending == 0 || tu_now() > end)
			return st.requests_pending;
		tu_sleep_ms(5);
	}
}

const char *
tu_lease_text(const char *path)
{
	static char out[256];
	struct tu_opts o = { .node = "a" };
	struct mkv_pool *pool;
	struct mkv_stat st;
	int rc;

	rc = tu_open(path, MKV_RDONLY, &o, &pool);
	if (rc == 0)
		rc = mkv_pool_stat(pool, &st);
	if (rc != 0)
		snprintf(out, sizeof(out), "(no stat: %s: %s)", mkv_strerror(rc), mkv_errormsg());
	else
		snprintf(out, sizeof(out), "lease: holder pid %u node \"%s\" slot %u "
				"generation %llu beat age %lld ms, requests pending %llu",
				st.lease_holder_pid, st.lease_holder_node, st.lease_holder_slot,
				(unsigned long long)st.lease_generation,
				(long long)st.lease_heartbeat_age_ms,
				(unsigned long long)st.requests_pending);
	mkv_pool_close(&pool);
	return out;
}

int
tu_is_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/* ---- processes ---- */

int
tu_wait(pid_t pid)
{
	int status;
	pid_t r;

	do
		r = waitpid(pid, &status, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

void
tu_kill(pid_t pid)
{
	kill(pid, SIGCONT);
	kill(pid, SIGKILL);
	(void)tu_wait(pid);
}

pid_t
tu_fork(void)
{
	pid_t parent = getpid(), pid;

	pid = fork();
	if (pid == 0) {
		/* never outlive the test (Check kills a test that times out) */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
	}
	return pid;
}

void *
tu_shared(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ck_assert_msg(p != MAP_FAILED, "mmap shared: %s", strerror(errno));
	return p;
}

void
tu_shared_free(void *p, size_t size)
{
	if (p != NULL)
		munmap(p, size);
}

/* ---- a child's reason for failing ---- */

#define WHY_SIZE 1024
/* an int claimed by the first failure, then its text at WHY_TEXT */
#define WHY_TEXT 8
static char *why;

void
tu_why_init(void)
{
	if (why == NULL)
		why = tu_shared(WHY_SIZE);
	else
		memset(why, 0, WHY_SIZE);
}

void
tu_why_free(void)
{
	tu_shared_free(why, WHY_SIZE);
	why = NULL;
}

const char *
tu_why(void)
{
	return why ? why + WHY_TEXT : "";
}

int
tu_fail(int code, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (why == NULL || __atomic_exchange_n((int *)why, 1, __ATOMIC_SEQ_CST) != 0)
		return code;
	n = snprintf(why + WHY_TEXT, WHY_SIZE - WHY_TEXT, "pid %d: ", (int)getpid());
	if (n < 0 || n >= WHY_SIZE - WHY_TEXT)
		return code;
	va_start(ap, fmt);
	vsnprintf(why + WHY_TEXT + n, (size_t)(WHY_SIZE - WHY_TEXT - n), fmt, ap);
	va_end(ap);
	return code;
}

/* ---- controlling child processes ---- */

int
tu_read_byte(int fd, double secs)
{
	double end = tu_now() + secs;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	unsigned char c;
	ssize_t n;
	int ms, rc;

	for (;;) {
		ms = (int)((end - tu_now()) * 1000.0);
		if (ms < 0)
			return -2;
		rc = poll(&pfd, 1, ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -1;
		if (rc == 0)
			return -2;
		n = read(fd, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		return n == 1 ? c : -1;
	}
}

int
tu_write_byte(int fd, char c)
{
	ssize_t n;

	do
		n = write(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

int
tu_stop(pid_t pid, double secs)
{
	if (kill(pid, SIGSTOP) < 0)
		return -1;
	return tu_wait_stopped(pid, secs);
}

int
tu_wait_stopped(pid_t pid, double secs)
{
	double end = tu_now() + secs;
	int status;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &status, WNOHANG | WUNTRACED);
		if (r == pid && WIFSTOPPED(status))
			return 0;
		if (r == pid || (r < 0 && errno != EINTR) || tu_now() > end)
			return -1;
		tu_sleep_ms(1);
	}
}

void
tu_child_start(struct tu_child *c, int (*fn)(int cmd, int ev, void *arg), void *arg)
{
	int down[2], up[2];

	ck_assert_int_eq(pipe(down), 0);
	ck_assert_int_eq(pipe(up), 0);
	c->pid = tu_fork();
	ck_assert_int_ge(c->pid, 0);
	if (c->pid == 0) {
		close(down[1]);
		close(up[0]);
		_exit(fn(down[0], up[1], arg));
	}
	close(down[0]);
	close(up[1]);
	c->cmd = down[1];
	c->ev = up[0];
}

void
tu_child_expect(struct tu_child *c, const char *who, char want, double secs)
{
	int got = tu_read_byte(c->ev, secs), status;

	if (got == want)
		return;
	kill(c->pid, SIGKILL);
	status = tu_wait(c->pid);
	c->pid = -1;
	ck_abort_msg("%s: expected event '%c' within %.0f s, got %d (exit status %d)", who, want,
			secs, got, status);
}

void
tu_child_end(struct tu_child *c)
{
	if (c->pid > 0)
		tu_kill(c->pid);
	if (c->cmd >= 0)
		close(c->cmd);
	if (c->ev >= 0)
		close(c->ev);
	c->pid = -1;
	c->cmd = c->ev = -1;
}

int
tu_await(const int *flag, int value, double secs)
{
	return TU_UNTIL(__atomic_load_n(flag, __ATOMIC_ACQUIRE) >= value, secs);
}

/* ---- filling a pool ---- */

long
tu_fill_until_full(struct mkv_pool *pool, const char *prefix, unsigned *next, size_t len)
{
	char key[64];
	size_t klen;
	long n = 0;
	int rc;

	for (;;) {
		klen = tu_key(key, prefix, *next);
		rc = tu_put(pool, key, klen, len);
		if (rc == MKV_E_NOSPC)
			return n;
		if (rc < 0)
			return rc;
		(*next)++;
		/* a pool that evicts on its own never fills */
		if (++n > 1000000)
			return -ELOOP;
	}
}

int
tu_churn(struct mkv_pool *pool, const char *prefix, int rounds)
{
	struct mkv_stat st;
	char key[64];
	unsigned next;
	long n;
	int rc;

	if ((rc = mkv_pool_stat(pool, &st)) < 0)
		return rc;
	for (int r = 0; r < rounds; r++) {
		next = 0;
		n = tu_fill_until_full(pool, prefix, &next, st.page_size);
		if (n < 0)
			return (int)n;
		for (unsigned i = 0; i < next; i++) {
			size_t klen = tu_key(key, prefix, i);

			if ((rc = mkv_del(pool, key, klen)) < 0)
				return rc;
		}
	}
	return 0;
}

/* ---- running ---- */

void
tu_setup(void)
{
	tu_dir = tu_tmpdir_new();
	ck_assert_msg(tu_dir != NULL, "cannot make a temporary directory: %s",
			strerror(errno));
	tu_path = tu_pool_path(tu_dir);
	ck_assert_ptr_nonnull(tu_path);
}

void
tu_teardown(void)
{
	free(tu_path);
	tu_path = NULL;
	tu_tmpdir_free(&tu_dir);
}

char *tu_emu;

void
tu_hosts_setup(void)
{
	tu_setup();
	ck_assert(asprintf(&tu_emu, "%s/emu", tu_dir) > 0);
	ck_assert_int_eq(mkdir(tu_emu, 0700), 0);
}

void
tu_hosts_teardown(void)
{
	free(tu_emu);
	tu_emu = NULL;
	tu_teardown();
}

void
tu_host_answer(char *out, size_t size, const char *cmd, int rc, long long done)
{
	if (rc)
		snprintf(out, size, "! %s: %s: %s", cmd, mkv_strerror(rc), mkv_errormsg());
	else
		snprintf(out, size, "= %lld", done);
}

void
tu_host_kill(struct tu_host *h)
{
	ck_assert_int_eq(kill(h->pid, SIGKILL), 0);
	ck_assert_int_ne(tu_reap(h->pid, 10), 0);
	fclose(h->to);
	fclose(h->from);
	h->to = h->from = NULL;
}

size_t
tu_host_key(char *key, const char *prefix, long long i, size_t vmax, size_t *len)
{
	size_t klen = tu_key(key, prefix, (unsigned)i);

	*len = tu_vlen(key, klen, 1, vmax);
	return klen;
}

long long
tu_host_put(struct mkv_pool *pool, const char *prefix, long long from, long long n, size_t vmax,
		int *rc)
{
	long long done = 0;
	char key[64];
	size_t klen, len;

	*rc = 0;
	for (long long i = from; i < from + n && *rc == 0; i++) {
		klen = tu_host_key(key, prefix, i, vmax, &len);
		if ((*rc = tu_put(pool, key, klen, len)) == 0)
			done++;
	}
	return done;
}

long long
tu_host_check(struct mkv_pool *pool, const char *prefix, long long from, long long n, size_t vmax)
{
	long long done = 0;
	char key[64];
	size_t klen, len;

	for (long long i = from; i < from + n; i++) {
		klen = tu_host_key(key, prefix, i, vmax, &len);
		done += tu_check(pool, key, klen, len) == 0;
	}
	return done;
}

int
tu_run_suite(Suite *s)
{
	const char *base = getenv("MKV_TEST_SHM");
	char root[PATH_MAX];
	SRunner *sr;
	int failed;

	/* a run killed midway (t/mutations.sh's timeouts) leaves its root: there, its caller's */
	snprintf(root, sizeof(root), "%s/mkvt.XXXXXX", base && *base ? base : "/dev/shm");
	if (mkdtemp(root) == NULL) {
		fprintf(stderr, "cannot create %s: %s\n", root, strerror(errno));
		return EXIT_FAILURE;
	}
	setenv(TU_ROOT_ENV, root, 1);
	/* non-coherent pools' lock directories (an emulated host has its own) */
	setenv("MARUKV_LOCK_DIR", root, 1);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	(void)tu_rmtree(root);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

double
tu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
tu_sleep_us(double us)
{
	struct timespec ts;

	if (us <= 0)
		return;
	ts.tv_sec = (time_t)(us / 1e6);
	ts.tv_nsec = (long)((us - (double)ts.tv_sec * 1e6) * 1e3);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void
tu_sleep_ms(double ms)
{
	tu_sleep_us(ms * 1000.0);
}

int
tu_wait_for(pid_t pid, double secs)
{
	double end = tu_now() + secs;
	int status;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -1;
		if (tu_now() > end)
			return -2;
		tu_sleep_ms(1);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

int
tu_reap(pid_t pid, double secs)
{
	int rc = tu_wait_for(pid, secs);

	if (rc == -2)
		tu_kill(pid);
	return rc;
}

void
tu_registry_begin(const char *pool, MDB_env **env, MDB_txn **txn)
{
	struct stat st;
	char *file;

	ck_assert_int_ge(asprintf(&file, "%s/registry.mdb", pool), 0);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_eq(mdb_env_create(env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(*env, 8), 0);
	ck_assert_int_eq(mdb_env_set_mapsize(*env, (size_t)st.st_size), 0);
	ck_assert_int_eq(mdb_env_open(*env, file, MDB_NOSUBDIR, 0600), 0);
	ck_assert_int_eq(mdb_txn_begin(*env, NULL, 0, txn), 0);
	free(file);
}

/* The tables are named "marukv.NAME", padded with '.' to 511 bytes (registry.c). */
MDB_dbi
tu_registry_table(MDB_txn *txn, const char *table)
{
	char name[512];
	MDB_dbi dbi;
	int n;

	if (table) {
		n = snprintf(name, sizeof(name), "marukv.%s", table);
		memset(name + n, '.', sizeof(name) - 1 - (size_t)n);
		name[sizeof(name) - 1] = '\0';
	}
	ck_assert_int_eq(mdb_dbi_open(txn, table ? name : NULL, 0, &dbi), 0);
	return dbi;
}

void
tu_registry_end(MDB_env *env, MDB_txn *txn)
{
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

/* ---- holding what other processes need ---- */

int
tu_lock_writers(const char *path)
{
	char *super = path_in(path, "super");
	int fd;

	ck_assert_ptr_nonnull(super);
	fd = open(super, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "open %s: %s", super, strerror(errno));
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	free(super);
	return fd;
}

int
tu_stay(int cmd, int ev, void *arg)
{
	const struct tu_stay *st = arg;
	struct mkv_pool *pool;

	(void)cmd;
	if (tu_open(st->path, 0, st->o, &pool) < 0)
		return 10;
	tu_write_byte(ev, 'o');
	for (;;)
		pause();
}

/* ---- the lease log ---- */

static int log_fd = -1;

static void
log_line(enum mkv_log_level level, const char *msg, void *arg)
{
	char line[640];
	int fd = (int)(intptr_t)arg, n;
	ssize_t w;

	(void)level;
	n = snprintf(line, sizeof(line), "%s\n", msg);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	w = write(fd, line, (size_t)n);
	(void)w;
}

char *
tu_log_path(const char *dir)
{
	return path_in(dir, "lease.log");
}

int
tu_log_install(const char *path)
{
	if (log_fd >= 0)
		close(log_fd);
	log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (log_fd < 0)
		return -errno;
	mkv_set_log(log_line, MKV_LOG_INFO, (void *)(intptr_t)log_fd);
	return 0;
}

void
tu_log_uninstall(void)
{
	mkv_set_log(NULL, MKV_LOG_ERR, NULL);
	if (log_fd >= 0)
		close(log_fd);
	log_fd = -1;
}

size_t
tu_log_taken(const char *path, struct tu_taken **out, size_t *bad)
{
	char line[1024];
	struct tu_taken t, *arr = NULL, *na;
	size_t n = 0, cap = 0;
	const char *p;
	FILE *f;

	*out = NULL;
	*bad = 0;
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		p = strstr(line, "lease taken: ");
		if (p == NULL)
			continue;
		memset(&t, 0, sizeof(t));
		if (sscanf(p, "lease taken: node %31s slot %u pid %ld generation %llu",
				t.node, &t.slot, &t.pid, &t.gen) != 4) {
			(*bad)++;
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			na = realloc(arr, cap * sizeof(*arr));
			ck_assert(na != NULL);
			arr = na;
		}
		arr[n++] = t;
	}
	fclose(f);
	*out = arr;
	return n;
}

const struct tu_taken *
tu_taken_by(const struct tu_taken *t, size_t n, long pid)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].pid == pid)
			return &t[i];
	return NULL;
}

/* ---- fault injection ---- */

const char *
tu_preload(const char *env, const char *built)
{
	static char path[PATH_MAX];
	const char *p = getenv(env);

	if (p == NULL || *p == '\0')
		p = built;
	if (realpath(p, path) == NULL)
		return NULL;
	return path;
}

void
tu_host_start(struct tu_host *h, const char *prog, const char *name, const char *emu_dir,
		const char *pool, const char *const *env)
{
	const char *shim = tu_preload("MKV_HOSTEMU", "t/.libs/hostemu.so");
	int to[2], from[2];
	char line[64];

	ck_assert_msg(shim != NULL, "no t/.libs/hostemu.so (MKV_HOSTEMU)");
	ck_assert_int_eq(pipe(to), 0);
	ck_assert_int_eq(pipe(from), 0);
	h->pid = tu_fork();
	ck_assert_int_ge(h->pid, 0);
	if (h->pid == 0) {
		char *argv[] = { (char *)prog, "--host", NULL };

		dup2(to[0], 0);
		dup2(from[1], 1);
		for (int fd = 3; fd < 64; fd++)
			close(fd);
		setenv("LD_PRELOAD", shim, 1);
		/* a sanitized build: its runtime is not the first library then */
		setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
		setenv("HOSTEMU_DIR", emu_dir, 1);
		setenv("HOSTEMU_POOL", pool, 1);
		setenv("HOSTEMU_HOST", name, 1);
		for (; env && *env; env++)
			putenv((char *)*env);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	h->to = fdopen(to[1], "w");
	h->from = fdopen(from[0], "r");
	ck_assert(h->to != NULL && h->from != NULL);
	snprintf(h->name, sizeof(h->name), "%s", name);
	ck_assert_msg(fgets(line, sizeof(line), h->from) != NULL && strcmp(line, "= ready\n") == 0,
			"host %s did not start", name);
}

void
tu_host_quiet(struct tu_host *h, const char *prog, const char *name, const char *extra,
		const char *arg)
{
	char node[32], boot[32];
	const char *env[] = { node, boot, "TU_COHERENCE=noncoherent", "HOSTEMU_NOISE=0", extra,
			NULL };

	snprintf(node, sizeof(node), "MARUKV_NODE=%s", name);
	snprintf(boot, sizeof(boot), "MARUKV_BOOT_ID=%s", name);
	tu_host_start(h, prog, name, tu_emu, tu_path, env);
	if (arg)
		ck_assert_int_eq(tu_host_do(h, "open %s", arg), 0);
}

void
tu_host_send(struct tu_host *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(h->to, fmt, ap);
	va_end(ap);
	fputc('\n', h->to);
	ck_assert_int_eq(fflush(h->to), 0);
}

long long
tu_host_recv(struct tu_host *h)
{
	char line[256];

	ck_assert_msg(fgets(line, sizeof(line), h->from) != NULL, "host %s (pid %d) ended",
			h->name, (int)h->pid);
	ck_assert_msg(line[0] == '=', "host %s: %s", h->name, line);
	return strtoll(line + 2, NULL, 0);
}

void
tu_host_end(struct tu_host *h)
{
	fclose(h->to);
	fclose(h->from);
	ck_assert_int_eq(tu_reap(h->pid, 10), 0);
}

int
tu_host_serve(void (*cmd)(char *line, char *out, size_t size))
{
	char line[256], out[256];

	printf("= ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) != NULL) {
		cmd(line, out, sizeof(out));
		printf("%s\n", out);
		fflush(stdout);
	}
	return 0;
}

const char *
tu_injector(void)
{
	return tu_preload("MKV_FAULTINJECT", "t/.libs/faultinject.so");
}

int
tu_run_injected(const char *so, const char *func, unsigned long k, const char *mode,
		char *const argv[], char *out, size_t size)
{
	char nth[32];
	const char *p;
	int fds[2], rc;
	size_t used = 0;
	ssize_t n;
	pid_t pid;
	double end;

	out[0] = '\0';
	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 1);
		close(fds[1]);
		snprintf(nth, sizeof(nth), "%lu", k);
		setenv("FI_FUNC", func, 1);
		setenv("FI_NTH", nth, 1);
		setenv("FI_MODE", mode, 1);
		p = getenv("MKV_TEST_FAULT_SPARE");
		setenv("FI_SPARE", p ? p : "libpmem2", 1);
		setenv("LD_PRELOAD", so, 1);
		unsetenv("MARUKV_LOG");
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(fds[1]);
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	end = tu_now() + 10;
	for (;;) {
		char scratch[512];

		if (used < size - 1)
			n = read(fds[0], out + used, size - 1 - used);
		else
			n = read(fds[0], scratch, sizeof(scratch));  /* the rest: dropped */
		if (n > 0) {
			if (used < size - 1)
				used += (size_t)n;
			continue;
		}
		if (n == 0)
			break;
		if (errno != EAGAIN && errno != EINTR)
			break;
		if (tu_now() > end) {
			kill(pid, SIGKILL);
			break;
		}
		tu_sleep_ms(1);
	}
	out[used] = '\0';
	close(fds[0]);
	rc = tu_wait(pid);
	return tu_now() > end ? -2 : rc;
}

int
tu_fi_find(struct tu_fi *fi)
{
	fi->arm = (void (*)(void))dlsym(RTLD_DEFAULT, "fi_arm");
	fi->disarm = (void (*)(void))dlsym(RTLD_DEFAULT, "fi_disarm");
	fi->calls = (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "fi_calls");
	fi->failed = (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "fi_failed");
	return fi->arm && fi->disarm && fi->calls && fi->failed ? 0 : -1;
}

/* ---- the environment ---- */

void
tu_b3sum16(const void *buf, size_t len, uint8_t out[16])
{
	char path[4200], cmd[4300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/b3sum-input", tu_dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "b3sum --length 16 --raw '%s'", path);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_msg(fread(out, 1, 16, f) == 16, "no output from %s: is b3sum installed?", cmd);
	ck_assert_int_eq(pclose(f), 0);
}

unsigned
tu_env(const char *name, unsigned def)
{
	const char *v = getenv(name);

	return v && *v ? (unsigned)strtoul(v, NULL, 0) : def;
}

int
tu_host_ready(struct tu_host *h, double secs)
{
	struct pollfd pfd = { .fd = fileno(h->from), .events = POLLIN };
	double end = tu_now() + secs;
	int n;

	do {
		n = poll(&pfd, 1, 100);
	} while ((n == 0 || (n < 0 && errno == EINTR)) && tu_now() < end);
	return n > 0;
}

/* ---- Redis servers on loopback ---- */

/*
 * Client ports from here and cluster bus ports (port + 10000) both stay
 * under Linux's default ephemeral range (32768 and up), where another
 * process's outgoing connection could hold one.
 */
#define TU_PORT_LO 20000U
#define TU_PORT_HI 22700U
#define TU_BUS_OFFSET 10000U
#define TU_REDIS_MAX 16U
/* how long a server may take to answer PING, the cluster to be made and agree */
#define TU_REDIS_UP_SECS 10.0
#define TU_CLUSTER_SECS 30.0

static struct tu_redis {
	pid_t pid;
	unsigned port;
	int cluster;
} tu_redis[TU_REDIS_MAX];
static unsigned tu_nredis;
static char *tu_redis_dir;
/* the process that started them: children of Check's forks inherit the table, and its atexit() */
static pid_t tu_redis_owner;

int
tu_on_path(const char *prog)
{
	const char *p = getenv("PATH");
	char file[PATH_MAX];

	while (p && *p) {
		const char *end = strchr(p, ':');
		int n = end ? (int)(end - p) : (int)strlen(p);

		/* an empty entry is the current directory */
		snprintf(file, sizeof(file), "%.*s/%s", n ? n : 1, n ? p : ".", prog);
		if (access(file, X_OK) == 0)
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

static int
port_free(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return 0;
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

/* A base of n free ports, their bus ports free too; 0 if none was found. */
static unsigned
free_ports(unsigned n)
{
	/* not a test's data: different in every process, so parallel runs pick apart */
	static uint64_t seed;

	if (!seed)
		seed = ((uint64_t)getpid() << 32) ^ (uint64_t)(tu_now() * 1e9);
	for (int tries = 0; tries < 200; tries++) {
		unsigned base = (unsigned)tu_rand_range(&seed, TU_PORT_LO, TU_PORT_HI - n), i;

		for (i = 0; i < n && port_free(base + i) && port_free(base + i + TU_BUS_OFFSET); i++)
			;
		if (i == n)
			return base;
	}
	return 0;
}

/* Whether the reply of the server at port to the inline command cmd has want in it within secs. */
static int
redis_says(unsigned port, const char *cmd, const char *want, double secs)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok = 0;
	double end = tu_now() + secs;
	char buf[8192];
	size_t n = 0;

	if (fd < 0)
		return 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
			send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) == (ssize_t)strlen(cmd)) {
		while (!ok && n < sizeof(buf) - 1) {
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			int ms = (int)((end - tu_now()) * 1000);
			ssize_t r;

			if (ms <= 0 || poll(&pfd, 1, ms) <= 0 ||
					(r = read(fd, buf + n, sizeof(buf) - 1 - n)) <= 0)
				break;
			n += (size_t)r;
			buf[n] = '\0';
			ok = strstr(buf, want) != NULL;
		}
	}
	close(fd);
	return ok;
}

/* Run argv (a child that dies with us), stdin from /dev/null, stdout and stderr appended to log. */
static pid_t
spawn_logged(const char *const argv[], const char *log)
{
	pid_t pid = tu_fork();

	if (pid == 0) {
		int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		int in = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (out < 0 || in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Kill and reap server i unless it was reaped already (by us, or by a test that killed it). */
static void
redis_end(unsigned i)
{
	int status;

	if (waitpid(tu_redis[i].pid, &status, WNOHANG) == 0)
		tu_kill(tu_redis[i].pid);
}

/* Start a redis-server on port in dir and wait for its PONG; its table entry, or -1. */
static int
redis_start(const char *dir, unsigned port, int cluster)
{
	char p[16], conf[32], log[PATH_MAX];
	const char *argv[32] = {
		"redis-server", "--port", p, "--bind", "127.0.0.1", "--protected-mode", "no",
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no",
	};
	double end = tu_now() + TU_REDIS_UP_SECS;
	unsigned i = tu_nredis, a = 15;
	int status;

	if (i == TU_REDIS_MAX)
		return -1;
	snprintf(p, sizeof(p), "%u", port);
	snprintf(conf, sizeof(conf), "nodes-%u.conf", port);
	snprintf(log, sizeof(log), "%s/redis-%u.log", dir, port);
	argv[a++] = "--cluster-enabled";
	argv[a++] = cluster ? "yes" : "no";
	if (cluster) {
		argv[a++] = "--cluster-config-file";
		argv[a++] = conf;
		argv[a++] = "--cluster-node-timeout";
		argv[a++] = "2000";
		/* a node that dies takes its own slots down, not the others' */
		argv[a++] = "--cluster-require-full-coverage";
		argv[a++] = "no";
	}
	argv[a] = NULL;
	tu_redis[i] = (struct tu_redis){ .pid = spawn_logged(argv, log), .port = port,
		.cluster = cluster };
	if (tu_redis[i].pid < 0)
		return -1;
	tu_nredis++;
	while (!redis_says(port, "PING\r\n", "+PONG", 1.0)) {
		/* gone: the port was taken after all */
		if (waitpid(tu_redis[i].pid, &status, WNOHANG) != 0 || tu_now() > end) {
			redis_end(i);
			tu_nredis--;
			return -1;
		}
		tu_sleep_ms(20);
	}
	return (int)i;
}

/* First use: note the owner and the directory, and stop the servers at exit. */
static int
redis_begin(const char *dir)
{
	static int registered;

	if (tu_nredis == 0) {
		free(tu_redis_dir);
		if (!(tu_redis_dir = strdup(dir)))
			return -1;
		tu_redis_owner = getpid();
	} else if (tu_redis_owner != getpid() || strcmp(dir, tu_redis_dir) != 0) {
		return -1;
	}
	if (!registered)
		registered = atexit(tu_cluster_stop) == 0;
	return 0;
}

/* Make the started nodes first .. first + n - 1 one cluster, all saying cluster_state:ok; 0 or -1. */
static int
cluster_create(const char *dir, unsigned first, unsigned n)
{
	char addr[TU_REDIS_MAX][32], log[PATH_MAX];
	const char *argv[TU_REDIS_MAX + 8] = { "redis-cli", "--cluster", "create" };
	double end = tu_now() + TU_CLUSTER_SECS;
	unsigned a = 3;
	int rc;

	for (unsigned i = 0; i < n; i++) {
		snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%u", tu_redis[first + i].port);
		argv[a++] = addr[i];
	}
	argv[a++] = "--cluster-replicas";
	argv[a++] = "0";
	argv[a++] = "--cluster-yes";
	argv[a] = NULL;
	snprintf(log, sizeof(log), "%s/cluster-create.log", dir);
	if ((rc = tu_reap(spawn_logged(argv, log), TU_CLUSTER_SECS)) != 0) {
		fprintf(stderr, "tu_cluster_start: redis-cli --cluster create: status %d (see %s)\n",
				rc, log);
		return -1;
	}
	for (unsigned i = 0; i < n; i++)
		while (!redis_says(tu_redis[first + i].port, "CLUSTER INFO\r\n", "cluster_state:ok", 1.0)) {
			if (tu_now() > end) {
				fprintf(stderr, "tu_cluster_start: node %u not ok after %.0f s\n",
						tu_redis[first + i].port, TU_CLUSTER_SECS);
				return -1;
			}
			tu_sleep_ms(20);
		}
	return 0;
}

int
tu_cluster_start(const char *dir, unsigned nodes, char *servers, size_t cap)
{
	unsigned first = tu_nredis;
	size_t len = 0;

	if (!tu_on_path("redis-server") || !tu_on_path("redis-cli"))
		return 77;
	if (nodes < 3 || nodes > 8 || tu_cluster_pid(0) > 0 || redis_begin(dir))
		return -1;
	/* a port taken between the test and the server's bind: other ports, a few times */
	for (int tries = 0;; tries++) {
		unsigned base = free_ports(nodes), i;

		for (i = 0; base && i < nodes && redis_start(dir, base + i, 1) >= 0; i++)
			;
		if (i == nodes)
			break;
		if (tries == 3) {
			fprintf(stderr, "tu_cluster_start: no redis-server would start and answer "
					"(see %s/redis-*.log)\n", dir);
			tu_cluster_stop();
			return -1;
		}
		while (tu_nredis > first)
			redis_end(--tu_nredis);
	}
	if (cluster_create(dir, first, nodes)) {
		tu_cluster_stop();
		return -1;
	}
	for (unsigned i = 0; i < nodes; i++) {
		int n = snprintf(servers + len, cap - len, "%s127.0.0.1:%u", i ? "," : "",
				tu_redis[first + i].port);

		if (n < 0 || (size_t)n >= cap - len) {
			tu_cluster_stop();
			return -1;
		}
		len += (size_t)n;
	}
	return 0;
}

int
tu_redis_standalone(const char *dir, unsigned *port)
{
	if (!tu_on_path("redis-server"))
		return 77;
	if (redis_begin(dir))
		return -1;
	for (int tries = 0; tries < 4; tries++) {
		unsigned p = free_ports(1);
		int i = p ? redis_start(dir, p, 0) : -1;

		if (i >= 0) {
			*port = p;
			return 0;
		}
	}
	fprintf(stderr, "tu_redis_standalone: no redis-server would start and answer "
			"(see %s/redis-*.log)\n", dir);
	return -1;
}

void
tu_cluster_stop(void)
{
	char file[PATH_MAX];

	if (tu_nredis == 0 || tu_redis_owner != getpid())
		return;
	for (unsigned i = 0; i < tu_nredis; i++) {
		redis_end(i);
		snprintf(file, sizeof(file), "%s/redis-%u.log", tu_redis_dir, tu_redis[i].port);
		unlink(file);
		snprintf(file, sizeof(file), "%s/nodes-%u.conf", tu_redis_dir, tu_redis[i].port);
		unlink(file);
	}
	snprintf(file, sizeof(file), "%s/cluster-create.log", tu_redis_dir);
	unlink(file);
	tu_nredis = 0;
	free(tu_redis_dir);
	tu_redis_dir = NULL;
}

/* The table entry of cluster node i, or -1. */
static int
cluster_node(unsigned i)
{
	for (unsigned k = 0; k < tu_nredis; k++)
		if (tu_redis[k].cluster && i-- == 0)
			return (int)k;
	return -1;
}

pid_t
tu_cluster_pid(unsigned i)
{
	int k = cluster_node(i);

	return k < 0 ? -1 : tu_redis[k].pid;
}

unsigned
tu_cluster_port(unsigned i)
{
	int k = cluster_node(i);

	return k < 0 ? 0 : tu_redis[k].port;
}
