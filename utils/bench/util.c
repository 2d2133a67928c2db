/* SPDX-License-Identifier: MIT */
/*
 * util.c -- helpers shared by the marukv-bench subcommands (see bench.h).
 */
#include <marukv.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* ---- clocks, hashes, random numbers --------------------------------------- */

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

double clock_cost_ns(void)
{
	enum { PAIRS = 1001 };
	double v[PAIRS];
	struct summary s;

	for (int i = 0; i < PAIRS; i++) {
		uint64_t t0 = now_ns();

		v[i] = (double)(now_ns() - t0);
	}
	return summarize(v, PAIRS, &s) < 0 ? 0 : s.median;
}

uint64_t fmix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t load64le(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void store64le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

void key_make(uint8_t key[BENCH_KEY_LEN], uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t h = fmix64(seed ^ fmix64(a * 0x9e3779b97f4a7c15ULL + b));

	store64le(key, h);
	store64le(key + 8, fmix64(h ^ b ^ 0x6b65792d6d616b65ULL));
}

void chain_hash(const uint8_t prev[BENCH_KEY_LEN], const uint32_t *tok, size_t n,
		uint8_t out[BENCH_KEY_LEN])
{
	uint64_t a = load64le(prev), b = load64le(prev + 8);

	for (size_t j = 0; j < n; j++) {
		a = (a ^ tok[j]) * 0x9e3779b97f4a7c15ULL;
		a ^= a >> 32;
		b = (b + tok[j]) * 0xc2b2ae3d27d4eb4fULL;
		b ^= b >> 29;
	}
	a = fmix64(a ^ (b << 31 | b >> 33) ^ n);
	b = fmix64(b ^ a);
	store64le(out, a);
	store64le(out + 8, b);
}

/* ---- options ---------------------------------------------------------------- */

int parse_u64(const char *s, int suffix, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno)
		return -1;
	if (suffix && *end) {
		unsigned shift;

		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
		if (v > (ULLONG_MAX >> shift))
			return -1;
		v <<= shift;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/* parse_u64_list() and parse_size_list(): suffix as for parse_u64(). */
static int parse_list(const char *s, int suffix, uint64_t lo, uint64_t hi, uint64_t *v,
		size_t max, size_t *n)
{
	char buf[256], *tok, *save = NULL;

	if (!s || strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	*n = 0;
	if (!*buf || buf[strlen(buf) - 1] == ',')
		return -1;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*n == max || parse_u64(tok, suffix, &v[*n]) < 0 || v[*n] < lo || v[*n] > hi)
			return -1;
		(*n)++;
	}
	return *n ? 0 : -1;
}

int parse_u64_list(const char *s, uint64_t lo, uint64_t hi, uint64_t *v, size_t max,
		size_t *n)
{
	return parse_list(s, 0, lo, hi, v, max, n);
}

int parse_size_list(const char *s, uint64_t lo, uint64_t hi, uint64_t *v, size_t max,
		size_t *n)
{
	return parse_list(s, 1, lo, hi, v, max, n);
}

void bad_value(const char *cmd, const char *name, const char *value, uint64_t lo,
		uint64_t hi)
{
	fprintf(stderr, PROG " %s: bad value for --%s: %s (%llu to %llu)\n", cmd, name,
			value, (unsigned long long)lo, (unsigned long long)hi);
}

/* ---- payloads ----------------------------------------------------------- */

/* Word j of the payload of a key. */
static uint64_t pattern_word(uint64_t k0, uint64_t k1, uint64_t j)
{
	return fmix64(k0 ^ (j * 0x9e3779b97f4a7c15ULL)) ^ k1;
}

void pattern_fill(void *dst, size_t len, const uint8_t key[BENCH_KEY_LEN])
{
	uint64_t k0 = load64le(key), k1 = load64le(key + 8);
	uint8_t *d = dst;
	size_t j, words = len / 8;

	for (j = 0; j < words; j++) {
		uint64_t w = pattern_word(k0, k1, j);

		memcpy(d + j * 8, &w, 8);
	}
	if (len % 8) {
		uint64_t w = pattern_word(k0, k1, j);

		memcpy(d + j * 8, &w, len % 8);
	}
}

size_t pattern_check(const void *src, size_t len, const uint8_t key[BENCH_KEY_LEN])
{
	uint64_t k0 = load64le(key), k1 = load64le(key + 8);
	const uint8_t *s = src;
	size_t j, words = len / 8;

	for (j = 0; j < words; j++) {
		uint64_t w = pattern_word(k0, k1, j), v;

		memcpy(&v, s + j * 8, 8);
		if (v != w)
			break;
	}
	if (j < words || len % 8) {
		uint64_t w = pattern_word(k0, k1, j);
		const uint8_t *wb = (const uint8_t *)&w;

		for (size_t b = 0; j * 8 + b < len && b < 8; b++)
			if (s[j * 8 + b] != wb[b])
				return j * 8 + b;
	}
	return len;
}

/* ---- samples ---------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double percentile_sorted(const double *sorted, size_t n, unsigned p)
{
	size_t rank = (p * n + 99) / 100;

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

int summarize(const double *v, size_t n, struct summary *s)
{
	double *w;

	if (n == 0) {
		s->median = s->min = s->max = s->p90 = s->p99 = NAN;
		return 0;
	}
	w = malloc(n * sizeof(*w));
	if (!w)
		return -1;
	memcpy(w, v, n * sizeof(*w));
	qsort(w, n, sizeof(*w), cmp_double);
	s->min = w[0];
	s->max = w[n - 1];
	s->median = n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
	s->p90 = percentile_sorted(w, n, 90);
	s->p99 = percentile_sorted(w, n, 99);
	free(w);
	return 0;
}

/* ---- output ------------------------------------------------------------------- */

void json_number(FILE *f, double v, int decimals)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.*f", decimals, v);
}

const char *mkv_why(int rc)
{
	const char *msg = mkv_errormsg();

	return *msg ? msg : mkv_strerror(rc);
}

/* ---- child processes ----------------------------------------------------------- */

void *shared_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void shared_free(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

int gate_init(struct gate *g)
{
	g->go[0] = g->go[1] = -1;
	if (pipe(g->ready) < 0)
		return -1;
	if (pipe(g->go) < 0) {
		close(g->ready[0]);
		close(g->ready[1]);
		g->ready[0] = g->ready[1] = -1;
		return -1;
	}
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void gate_child(struct gate *g)
{
	close_fd(&g->ready[0]);
	close_fd(&g->go[1]);
}

void gate_parent(struct gate *g)
{
	close_fd(&g->ready[1]);
	close_fd(&g->go[0]);
}

int gate_ready(struct gate *g)
{
	char c = 'r';
	ssize_t n;

	while ((n = write(g->ready[1], &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		return -1;
	/* The parent never writes to go: the gate opens when it closes it. */
	while ((n = read(g->go[0], &c, 1)) < 0 && errno == EINTR)
		;
	return n == 0 ? 0 : -1;
}

int gate_wait(struct gate *g, size_t n)
{
	char buf[64];

	while (n > 0) {
		ssize_t r = read(g->ready[0], buf, n < sizeof(buf) ? n : sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n -= (size_t)r;
	}
	return 0;
}

void gate_open(struct gate *g)
{
	close_fd(&g->go[1]);
}

void gate_close(struct gate *g)
{
	close_fd(&g->ready[0]);
	close_fd(&g->ready[1]);
	close_fd(&g->go[0]);
	close_fd(&g->go[1]);
}

pid_t child_fork(const char *cmd)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		fprintf(stderr, PROG " %s: fork: %s\n", cmd, strerror(errno));
	return pid;
}

int child_reap(pid_t pid, const char *cmd, const char *what, int quiet)
{
	int ws;

	while (waitpid(pid, &ws, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, PROG " %s: waitpid %s (pid %ld): %s\n", cmd, what,
					(long)pid, strerror(errno));
			return -1;
		}
	if (WIFSIGNALED(ws)) {
		if (!quiet)
			fprintf(stderr, PROG " %s: %s (pid %ld) killed by signal %d\n", cmd,
					what, (long)pid, WTERMSIG(ws));
		return -1;
	}
	return WEXITSTATUS(ws);
}

/* Read exactly len bytes; 0 at end of file, 1 when read, -1 on error. */
static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, (char *)buf + got, len - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 && got == 0 ? 0 : -1;
		got += (size_t)r;
	}
	return 1;
}

static void crew_work(int go, int done, crew_fn fn, void *arg, size_t i)
{
	unsigned job;
	int r;

	while ((r = read_full(go, &job, sizeof(job))) == 1) {
		char st = fn(arg, i, job) ? 1 : 0;

		if (write(done, &st, 1) != 1 || st)
			_exit(EXIT_ERR);
	}
	_exit(r == 0 ? EXIT_OK : EXIT_ERR);
}

static void crew_free(struct crew *c)
{
	for (size_t i = 0; i < c->n; i++) {
		close_fd(&c->go[i]);
		close_fd(&c->done[i]);
	}
	free(c->pid);
	free(c->go);
	free(c->done);
	c->pid = NULL;
	c->go = c->done = NULL;
}

int crew_start(struct crew *c, size_t n, crew_fn fn, void *arg, const char *cmd)
{
	int (*p)[2] = calloc(2 * n, sizeof(*p));
	size_t made = 0, forked = 0;

	*c = (struct crew){ .n = n, .cmd = cmd };
	c->pid = calloc(n, sizeof(*c->pid));
	c->go = malloc(n * sizeof(*c->go));
	c->done = malloc(n * sizeof(*c->done));
	if (!p || !c->pid || !c->go || !c->done) {
		fprintf(stderr, PROG " %s: out of memory\n", cmd);
		free(p);
		free(c->pid);
		free(c->go);
		free(c->done);
		*c = (struct crew){ 0 };
		return -1;
	}
	/* A worker that died must make crew_run() fail, not kill us with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	for (; made < 2 * n; made++)
		if (pipe(p[made]) < 0) {
			fprintf(stderr, PROG " %s: pipe: %s\n", cmd, strerror(errno));
			break;
		}
	/* Pipe 2i carries jobs to worker i, pipe 2i+1 its answers. */
	for (; made == 2 * n && forked < n; forked++) {
		pid_t pid = child_fork(cmd);

		if (pid < 0)
			break;
		if (pid == 0) {
			for (size_t j = 0; j < 2 * n; j++)
				if (j / 2 != forked) {
					close(p[j][0]);
					close(p[j][1]);
				}
			close(p[2 * forked][1]);
			close(p[2 * forked + 1][0]);
			crew_work(p[2 * forked][0], p[2 * forked + 1][1], fn, arg, forked);
		}
		c->pid[forked] = pid;
	}
	for (size_t j = 0; j < made; j++) {
		if (j % 2 == 0) {
			c->go[j / 2] = p[j][1];
			close(p[j][0]);
		} else {
			c->done[j / 2] = p[j][0];
			close(p[j][1]);
		}
	}
	for (size_t j = made; j < 2 * n; j++)
		*(j % 2 ? &c->done[j / 2] : &c->go[j / 2]) = -1;
	free(p);
	if (forked < n) {
		crew_stop(c);
		return -1;
	}
	return 0;
}

int crew_run(struct crew *c, unsigned job, size_t k)
{
	int rc = 0;

	for (size_t i = 0; i < k; i++)
		if (write(c->go[i], &job, sizeof(job)) != (ssize_t)sizeof(job))
			rc = -1;
	for (size_t i = 0; i < k; i++) {
		char st = 1;

		if (read_full(c->done[i], &st, 1) != 1 || st)
			rc = -1;
	}
	return rc;
}

int crew_stop(struct crew *c)
{
	int rc = 0;

	for (size_t i = 0; i < c->n; i++)
		close_fd(&c->go[i]);
	for (size_t i = 0; i < c->n; i++)
		if (c->pid[i] > 0 && child_reap(c->pid[i], c->cmd, "worker", 0) != 0)
			rc = -1;
	crew_free(c);
	return rc;
}

/* ---- pools and the raw LMDB peer --------------------------------------------------- */

int pool_make(const char *path, const struct pool_spec *spec, const char *cmd,
		struct mkv_pool **out)
{
	struct mkv_opts *opts = NULL;
	struct mkv_stat st;
	int rc = mkv_opts_new(&opts);

	*out = NULL;
	if (!rc)
		rc = mkv_opts_set_page_size(opts, BENCH_PAGE);
	if (!rc)
		rc = mkv_opts_set_data_size(opts, spec->pages * BENCH_PAGE);
	if (!rc && spec->max_clients)
		rc = mkv_opts_set_max_clients(opts, spec->max_clients);
	if (!rc && spec->registry_size)
		rc = mkv_opts_set_registry_size(opts, spec->registry_size);
	if (!rc)
		rc = mkv_opts_set_watermarks(opts, spec->wm_low, spec->wm_high);
	if (!rc)
		rc = mkv_pool_open(path, MKV_CREATE, opts, out);
	mkv_opts_delete(&opts);
	if (!rc)
		rc = mkv_pool_stat(*out, &st);
	if (rc) {
		fprintf(stderr, PROG " %s: %s: %s\n", cmd, path, mkv_why(rc));
		mkv_pool_close(out);
		return -1;
	}
	if (st.lease_holder_pid != (uint32_t)getpid()) {
		fprintf(stderr, PROG " %s: %s: the lease holder is pid %" PRIu32
				", not this process (%ld)\n", cmd, path, st.lease_holder_pid,
				(long)getpid());
		mkv_pool_close(out);
		return -1;
	}
	return 0;
}

_Static_assert(sizeof(struct peer_entry) == 56, "a marukv registry entry");

int peer_fail(const char *cmd, const char *what, int rc)
{
	fprintf(stderr, PROG " %s: LMDB peer: %s: %s\n", cmd, what, mdb_strerror(rc));
	return -1;
}

int peer_env(const char *file, uint64_t mapsize, unsigned flags, MDB_env **env)
{
	int rc = mdb_env_create(env);

	if (rc)
		return rc;
	if ((rc = mdb_env_set_maxdbs(*env, 2)) || (rc = mdb_env_set_mapsize(*env, mapsize)) ||
	    (rc = mdb_env_open(*env, file, MDB_NOSUBDIR | MDB_NOTLS | MDB_NORDAHEAD | flags,
			0666))) {
		mdb_env_close(*env);
		*env = NULL;
	}
	return rc;
}

int peer_dbis(MDB_env *env, unsigned flags, MDB_dbi *entries, MDB_dbi *pages)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(env, NULL, flags & MDB_CREATE ? 0 : MDB_RDONLY, &txn);

	if (rc)
		return rc;
	if ((rc = mdb_dbi_open(txn, NULL, 0, entries)) ||
	    (rc = mdb_dbi_open(txn, "pages", flags, pages))) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);
}

/* ---- scratch directories ------------------------------------------------------ */

char *path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);

	if (!p)
		return NULL;
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, name, b + 1);
	return p;
}

char *scratch_dir(const char *dir, const char *cmd)
{
	char *t = path_join(dir, PROG ".XXXXXX");

	if (!t) {
		fprintf(stderr, PROG " %s: out of memory\n", cmd);
		return NULL;
	}
	if (!mkdtemp(t)) {
		fprintf(stderr, PROG " %s: cannot create a directory in %s: %s\n", cmd, dir,
				strerror(errno));
		free(t);
		return NULL;
	}
	return t;
}

/* Empty the directory dfd (closed here); 0 or -errno. */
static int remove_entries(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	while ((e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = -errno;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0 || (rc = remove_entries(sub)) < 0) {
				if (sub < 0)
					rc = -errno;
				break;
			}
			if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0) {
				rc = -errno;
				break;
			}
		} else if (unlinkat(dirfd(d), e->d_name, 0) < 0) {
			rc = -errno;
			break;
		}
	}
	closedir(d);
	return rc;
}

int scratch_remove(const char *path, const char *cmd)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = dfd < 0 ? -errno : remove_entries(dfd);

	if (rc == 0 && rmdir(path) < 0)
		rc = -errno;
	if (rc < 0) {
		fprintf(stderr, PROG " %s: cannot remove %s: %s\n", cmd, path, strerror(-rc));
		return -1;
	}
	return 0;
}
