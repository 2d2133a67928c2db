/* SPDX-License-Identifier: MIT */
/*
 * check_hosts.c -- a pool shared by processes of several emulated hosts
 * without cache coherence (t/hostemu.so): what one host publishes, the
 * others read, byte for byte, in a non-coherent pool; writes forwarded
 * across hosts are answered; a holder killed on one host is replaced by
 * another; and, to show the emulator is not lenient, a coherent pool read
 * across hosts gives stale values.
 *
 * Each host is this program again (argv[1] == "--host") under the
 * emulator, with its own node name and boot id (MARUKV_NODE,
 * MARUKV_BOOT_ID); it obeys the commands of host_cmd().  Values are
 * checked whole against the pattern of their key (tu_check()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "testutil.h"

#define KEYS 40U
#define VMAX (3 * TU_PAGE_SIZE)
/*
 * A holder fences itself when a renewal comes a quarter period late: a
 * quarter of 400 ms leaves the emulated holders 100 ms of stall, which a
 * sanitizer build on two busy cores can take.
 */
#define LEASE_MS 400U
#define CLIENT_TIMEOUT_MS 1000U
/* a node entry per host and one spare: CLIENTS / NODES slots a host */
#define NODES 4U
#define CLIENTS 64U

/* ===================================================================== */
/* The host process                                                      */

static struct mkv_pool *hpool;
/* more handles of the host's process, each with a client slot of its own */
#define MANY 16U
static struct mkv_pool *hmany[MANY];
static unsigned nmany;

/* Keys P<FROM> .. P<FROM+N-1> read by one mkv_get_batch(): how many read back whole. */
static long long
host_batch(const char *prefix, long long from, long long n, int *rc)
{
	char (*keys)[64] = calloc((size_t)n, 64);
	struct mkv_key *k = calloc((size_t)n, sizeof(*k));
	struct mkv_view *v = calloc((size_t)n, sizeof(*v));
	size_t found = 0, len;
	long long whole = 0;

	if (!keys || !k || !v) {
		*rc = MKV_E_NOMEM;
		n = 0;
	}
	for (long long i = 0; i < n; i++) {
		k[i].data = keys[i];
		k[i].len = tu_host_key(keys[i], prefix, from + i, VMAX, &len);
	}
	if (n && (*rc = mkv_get_batch(hpool, k, (size_t)n, 0, v, &found)) == 0)
		for (long long i = 0; i < n; i++) {
			tu_host_key(keys[i], prefix, from + i, VMAX, &len);
			whole += v[i].data && v[i].len == len &&
					tu_verify(v[i].data, v[i].len, k[i].data, k[i].len) == -1;
			if (v[i].data)
				mkv_release(hpool, &v[i]);
		}
	free(keys);
	free(k);
	free(v);
	return whole;
}

/*
 * Commands, one a line, answered "= value" or "! why":
 *   open [- L C]    open (creating) the pool as this host's node; a
 *                   pool it creates has a lease period of L ms and a
 *                   client timeout of C ms if given
 *   put P FROM N    publish keys P<FROM> .. P<FROM+N-1>: how many succeeded
 *   check P FROM N  how many of them read back whole
 *   batch P FROM N  how many of them one mkv_get_batch() reads back whole
 *   churn P N R     R rounds of publishing P0 .. P<N-1> and deleting them
 *                   again: how many rounds completed
 *   holds           1 if this process holds the lease
 *   verify          problems a deep mkv_pool_verify() finds
 *   many N          open N more handles (at most MANY in all)
 *   alive           how many of those still hold their slots (a call on
 *                   each does not fail with MKV_E_EXPIRED)
 *   clients         client slots in use, as mkv_pool_stat() counts them
 *   nodes           node entries in use, likewise
 *   mine            1 if every slot in use with a pid of this process is
 *                   named after this host's node by mkv_pool_clients()
 *   try P FROM      the result of publishing P<FROM> (0 or an error code)
 *   get P FROM      the result of mkv_get() of P<FROM>, its view released
 *   close           close the pool and the other handles
 */
static void
host_cmd(char *line, char *out, size_t size)
{
	const char *host = getenv("HOSTEMU_HOST");
	struct tu_opts o = { .node = host, .host = host, .lease_ms = LEASE_MS,
			.client_timeout_ms = CLIENT_TIMEOUT_MS, .max_nodes = NODES,
			.max_clients = CLIENTS };
	char cmd[16] = "", prefix[16] = "", key[64];
	long long from = 0, n = 0, done = 0;
	struct mkv_client cl[CLIENTS];
	struct mkv_verify v;
	struct mkv_view view;
	struct mkv_stat st;
	size_t klen, len, ncl;
	int rc = 0;

	sscanf(line, "%15s %15s %lld %lld", cmd, prefix, &from, &n);
	if (strcmp(cmd, "open") == 0) {
		o.lease_ms = from ? (unsigned)from : o.lease_ms;
		o.client_timeout_ms = n ? (unsigned)n : o.client_timeout_ms;
		rc = tu_open(getenv("HOSTEMU_POOL"), MKV_CREATE, &o, &hpool);
	} else if (strcmp(cmd, "put") == 0) {
		done = tu_host_put(hpool, prefix, from, n, VMAX, &rc);
	} else if (strcmp(cmd, "check") == 0) {
		done = tu_host_check(hpool, prefix, from, n, VMAX);
	} else if (strcmp(cmd, "batch") == 0) {
		done = host_batch(prefix, from, n, &rc);
	} else if (strcmp(cmd, "churn") == 0) {
		for (long long r = 0; r < n && rc == 0; r++, done++)
			for (long long i = 0; i < from && rc == 0; i++) {
				klen = tu_host_key(key, prefix, i, VMAX, &len);
				if ((rc = tu_put(hpool, key, klen, len)) == 0)
					rc = mkv_del(hpool, key, klen);
			}
	} else if (strcmp(cmd, "holds") == 0) {
		if ((rc = mkv_pool_stat(hpool, &st)) == 0)
			done = st.lease_holder_pid == (uint32_t)getpid();
	} else if (strcmp(cmd, "verify") == 0) {
		if ((rc = mkv_pool_verify(hpool, MKV_VERIFY_DEEP, &v)) == 0)
			done = (long long)v.problems;
	} else if (strcmp(cmd, "many") == 0) {
		sscanf(line, "%15s %lld", cmd, &n);
		for (; done < n && nmany < MANY && rc == 0; done++)
			rc = tu_open(getenv("HOSTEMU_POOL"), 0, &o, &hmany[nmany++]);
	} else if (strcmp(cmd, "alive") == 0) {
		for (unsigned i = 0; i < nmany; i++)
			done += mkv_pool_stat(hmany[i], &st) == 0;
	} else if (strcmp(cmd, "clients") == 0 || strcmp(cmd, "nodes") == 0) {
		if ((rc = mkv_pool_stat(hpool, &st)) == 0)
			done = cmd[0] == 'c' ? st.clients : st.nodes;
	} else if (strcmp(cmd, "mine") == 0) {
		done = 1;
		if ((rc = mkv_pool_clients(hpool, cl, CLIENTS, &ncl)) == 0)
			for (size_t i = 0; i < ncl; i++)
				if (cl[i].pid == (uint32_t)getpid() && strcmp(cl[i].node, host) != 0)
					done = 0;
	} else if (strcmp(cmd, "try") == 0) {
		klen = tu_host_key(key, prefix, from, VMAX, &len);
		done = tu_put(hpool, key, klen, len);
	} else if (strcmp(cmd, "get") == 0) {
		klen = tu_host_key(key, prefix, from, VMAX, &len);
		if ((done = mkv_get(hpool, key, klen, &view)) == 0)
			mkv_release(hpool, &view);
	} else if (strcmp(cmd, "close") == 0) {
		mkv_pool_close(&hpool);
		while (nmany)
			mkv_pool_close(&hmany[--nmany]);
	} else {
		snprintf(out, size, "! unknown command %s", cmd);
		return;
	}
	tu_host_answer(out, size, cmd, rc, done);
}

/* ===================================================================== */
/* The test's side                                                       */

/*
 * Host @p name of a pool of coherence @p mode, with @p noise spontaneous
 * events per ms, flushes that wait @p lag microseconds, and one more
 * variable of the environment @p extra (or NULL).
 */
static void
host_launch(struct tu_host *h, const char *name, const char *mode, const char *noise,
		const char *lag, const char *extra)
{
	char node[32], boot[32], coh[32], nz[32], seed[32], lg[32];
	const char *env[] = { node, boot, coh, nz, seed, lg, extra, NULL };

	snprintf(node, sizeof(node), "MARUKV_NODE=%s", name);
	snprintf(boot, sizeof(boot), "MARUKV_BOOT_ID=%s", name);
	snprintf(coh, sizeof(coh), "TU_COHERENCE=%s", mode);
	snprintf(nz, sizeof(nz), "HOSTEMU_NOISE=%s", noise);
	snprintf(seed, sizeof(seed), "HOSTEMU_SEED=%u", (unsigned)getpid());
	snprintf(lg, sizeof(lg), "HOSTEMU_LAG=%s", lag);
	tu_host_start(h, "check_hosts", name, tu_emu, tu_path, env);
}

/* host_launch(), and the pool opened there */
static void
host_start_with(struct tu_host *h, const char *name, const char *mode, const char *noise,
		const char *lag, const char *extra)
{
	host_launch(h, name, mode, noise, lag, extra);
	ck_assert_int_eq(tu_host_do(h, "open"), 0);
}

static void
host_start(struct tu_host *h, const char *name, const char *mode, const char *noise)
{
	host_start_with(h, name, mode, noise, "0", NULL);
}

/* How many lock files of LMDB host @p name has, in lock directories of its own. */
static size_t
host_lock_files(const char *name)
{
	char pattern[PATH_MAX];
	glob_t g;
	size_t n;

	snprintf(pattern, sizeof(pattern), "%s/%s/marukv-*/registry.mdb-lock", tu_emu, name);
	if (glob(pattern, 0, NULL, &g) != 0)
		return 0;
	n = g.gl_pathc;
	globfree(&g);
	return n;
}

/*
 * Three hosts on one pool: each one's writes, direct or forwarded, read
 * whole by the others.  Each host has LMDB's lock file in a lock
 * directory of its own (the emulator gives each host its base), none is
 * in the pool.
 */
static void
three_hosts(const char *noise)
{
	char lock[PATH_MAX];
	struct stat st;

	struct tu_host h[3];

	host_start(&h[0], "h1", "noncoherent", noise);
	ck_assert_int_eq(tu_host_do(&h[0], "holds"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	host_start(&h[1], "h2", "noncoherent", noise);
	host_start(&h[2], "h3", "noncoherent", noise);
	ck_assert_int_eq(tu_host_do(&h[1], "check a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 %u", KEYS), KEYS);
	/* h2's and h3's publishes go to the holder on h1 and back */
	ck_assert_int_eq(tu_host_do(&h[1], "holds"), 0);
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "put c 0 %u", KEYS), KEYS);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(tu_host_do(&h[i], "check b 0 %u", KEYS), KEYS);
		ck_assert_int_eq(tu_host_do(&h[i], "check c 0 %u", KEYS), KEYS);
	}
	/* a later commit of h1 reaches hosts that have read before */
	ck_assert_int_eq(tu_host_do(&h[0], "put a %u %u", KEYS, KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[1], "check a 0 %u", 2 * KEYS), 2 * KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 %u", 2 * KEYS), 2 * KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "verify"), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(tu_host_do(&h[i], "close"), 0);
		tu_host_end(&h[i]);
	}
	ck_assert_uint_eq(host_lock_files("h1"), 1);
	ck_assert_uint_eq(host_lock_files("h2"), 1);
	ck_assert_uint_eq(host_lock_files("h3"), 1);
	snprintf(lock, sizeof(lock), "%s/registry.mdb-lock", tu_path);
	ck_assert_msg(lstat(lock, &st) < 0, "the non-coherent pool has %s", lock);
}

START_TEST(test_three_hosts_share_a_noncoherent_pool)
{
	three_hosts("0");
}
END_TEST

START_TEST(test_three_hosts_share_a_noncoherent_pool_with_noisy_caches)
{
	three_hosts("20");
}
END_TEST

/*
 * The control: in a coherent pool shared by hosts without coherence, the
 * payloads one host wrote stay in its cache (nothing writes them back to
 * the device), and another host reads none of its values whole.  If this
 * passed as the non-coherent test does, the emulator would be lenient.
 */
START_TEST(test_coherent_pool_across_hosts_reads_stale_values)
{
	struct tu_host h1, h2;

	host_start(&h1, "h1", "coherent", "0");
	ck_assert_int_eq(tu_host_do(&h1, "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h1, "check a 0 %u", KEYS), KEYS);
	host_start(&h2, "h2", "coherent", "0");
	ck_assert_int_eq(tu_host_do(&h2, "check a 0 %u", KEYS), 0);
	ck_assert_int_eq(tu_host_do(&h1, "close"), 0);
	ck_assert_int_eq(tu_host_do(&h2, "close"), 0);
	tu_host_end(&h1);
	tu_host_end(&h2);
}
END_TEST

/*
 * The holder's host dies (its process killed): a writer on another host
 * takes the lease over, and a third host reads everything either of them
 * acknowledged.
 */
START_TEST(test_holder_killed_on_one_host_is_replaced_on_another)
{
	struct tu_host h[3];

	host_start(&h[0], "h1", "noncoherent", "0");
	host_start(&h[1], "h2", "noncoherent", "0");
	host_start(&h[2], "h3", "noncoherent", "0");
	ck_assert_int_eq(tu_host_do(&h[0], "holds"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 %u", KEYS), KEYS);
	ck_assert_int_eq(kill(h[0].pid, SIGKILL), 0);
	ck_assert_int_ne(tu_reap(h[0].pid, 10), 0);
	fclose(h[0].to);
	fclose(h[0].from);
	ck_assert_int_eq(tu_host_do(&h[1], "put c 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[1], "holds"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "put d 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "check b 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "check c 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[1], "check d 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[1], "verify"), 0);
	for (int i = 1; i < 3; i++) {
		ck_assert_int_eq(tu_host_do(&h[i], "close"), 0);
		tu_host_end(&h[i]);
	}
}
END_TEST

/*
 * Live hosts keep their roles: for several client timeouts the holder on
 * h1 and the writers on h2 and h3 stay alive by their heartbeats, which
 * the others see only through invalidations.  Nobody takes the lease from
 * h1, nobody's slot is revoked (a write would fail with MKV_E_EXPIRED),
 * and every write is answered.
 */
START_TEST(test_live_hosts_keep_their_roles)
{
	struct tu_host h[3];
	double end;
	unsigned round = 0;

	host_start(&h[0], "h1", "noncoherent", "0");
	host_start(&h[1], "h2", "noncoherent", "0");
	host_start(&h[2], "h3", "noncoherent", "0");
	ck_assert_int_eq(tu_host_do(&h[0], "holds"), 1);
	end = tu_now() + 3.0 * CLIENT_TIMEOUT_MS / 1000;
	while (tu_now() < end) {
		ck_assert_int_eq(tu_host_do(&h[1 + round % 2], "put r %u 1", round), 1);
		tu_sleep_ms(LEASE_MS);
		round++;
	}
	ck_assert_int_eq(tu_host_do(&h[0], "holds"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "holds"), 0);
	ck_assert_int_eq(tu_host_do(&h[2], "holds"), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(tu_host_do(&h[i], "check r 0 %u", round), round);
		ck_assert_int_eq(tu_host_do(&h[i], "close"), 0);
		tu_host_end(&h[i]);
	}
}
END_TEST

/*
 * Two hosts race for a dead holder's lease, round after round: each sends
 * its write at once, both writes succeed, exactly one of the two holds the
 * lease after, and every key either wrote is there.  Split brain between
 * hosts would show as two holders, a lost key or a registry that does not
 * verify.
 */
START_TEST(test_hosts_race_for_a_dead_holders_lease)
{
	for (unsigned round = 0; round < 3; round++) {
		struct tu_host h[3];

		host_start(&h[0], "h1", "noncoherent", "0");
		host_start(&h[1], "h2", "noncoherent", "0");
		host_start(&h[2], "h3", "noncoherent", "0");
		ck_assert_int_eq(tu_host_do(&h[0], "put z %u 1", round), 1);
		ck_assert_int_eq(kill(h[0].pid, SIGKILL), 0);
		ck_assert_int_ne(tu_reap(h[0].pid, 10), 0);
		fclose(h[0].to);
		fclose(h[0].from);
		tu_host_send(&h[1], "put x %u %u", round * KEYS, KEYS);
		tu_host_send(&h[2], "put y %u %u", round * KEYS, KEYS);
		ck_assert_int_eq(tu_host_recv(&h[1]), KEYS);
		ck_assert_int_eq(tu_host_recv(&h[2]), KEYS);
		ck_assert_int_eq(tu_host_do(&h[1], "holds") + tu_host_do(&h[2], "holds"), 1);
		ck_assert_int_eq(tu_host_do(&h[1], "check y 0 %u", (round + 1) * KEYS),
				(round + 1) * KEYS);
		ck_assert_int_eq(tu_host_do(&h[2], "check x 0 %u", (round + 1) * KEYS),
				(round + 1) * KEYS);
		ck_assert_int_eq(tu_host_do(&h[2], "check z 0 %u", round + 1), round + 1);
		ck_assert_int_eq(tu_host_do(&h[1], "verify"), 0);
		for (int i = 1; i < 3; i++) {
			ck_assert_int_eq(tu_host_do(&h[i], "close"), 0);
			tu_host_end(&h[i]);
		}
	}
}
END_TEST

/*
 * A second process of a host opens the pool while its host's LMDB lock
 * file, kept by the first, trails another host's commits: the id there
 * is behind the newest meta, and that is no damage.
 */
START_TEST(test_a_second_process_of_a_host_opens_behind_other_hosts_commits)
{
	struct tu_host h1, h2a, h2b;

	host_start(&h1, "h1", "noncoherent", "0");
	host_start(&h2a, "h2", "noncoherent", "0");
	ck_assert_int_eq(tu_host_do(&h1, "put a 0 %u", KEYS), KEYS);
	host_start(&h2b, "h2", "noncoherent", "0");
	ck_assert_int_eq(tu_host_do(&h2b, "check a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h2a, "check a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h2b, "close"), 0);
	ck_assert_int_eq(tu_host_do(&h2a, "close"), 0);
	ck_assert_int_eq(tu_host_do(&h1, "close"), 0);
	tu_host_end(&h2b);
	tu_host_end(&h2a);
	tu_host_end(&h1);
}
END_TEST

/*
 * A reader on one host is stopped inside a registry read txn (a batch of
 * lookups, after the first value was found) while the holder on another
 * host deletes and rewrites enough to reuse every page LMDB freed; its
 * caches drop everything meanwhile.  Its host's lock table, where LMDB
 * looks for readers, is not the holder's: only the snap its slot
 * published keeps the holder off the pages of its snapshot.  Continued,
 * it finds every key of the batch, whole.  Three rounds.
 */
START_TEST(test_a_reader_stopped_in_a_txn_keeps_its_snapshot_across_hosts)
{
	for (unsigned round = 0; round < 3; round++) {
		struct tu_host h1, h2;

		host_start(&h1, "h1", "noncoherent", "0");
		ck_assert_int_eq(tu_host_do(&h1, "put a%u 0 %u", round, 2 * KEYS), 2 * KEYS);
		host_start_with(&h2, "h2", "noncoherent", "0", "0", "HOSTEMU_STOP=src/get.c:");
		tu_host_send(&h2, "batch a%u 0 %u", round, 2 * KEYS);
		ck_assert_int_eq(tu_wait_stopped(h2.pid, 30), 0);
		ck_assert_int_eq(tu_host_do(&h1, "churn z 10 2"), 2);
		ck_assert_int_eq(kill(h2.pid, SIGCONT), 0);
		ck_assert_int_eq(tu_host_recv(&h2), 2 * KEYS);
		ck_assert_int_eq(tu_host_do(&h2, "check a%u 0 %u", round, 2 * KEYS), 2 * KEYS);
		ck_assert_int_eq(tu_host_do(&h2, "verify"), 0);
		ck_assert_int_eq(tu_host_do(&h2, "close"), 0);
		ck_assert_int_eq(tu_host_do(&h1, "close"), 0);
		tu_host_end(&h2);
		tu_host_end(&h1);
	}
}
END_TEST

/*
 * Two hosts open many clients at once, three times over, each filling its
 * node's range of slots: no slot is claimed by both (a compare-and-swap
 * is atomic within a host only, so two hosts swapping the same owner word
 * would both win, and one lose its slot on the next look).  Their flushes
 * lag, so that a claim stays in its host's cache long enough for the other
 * host to read the slot still free.  Every handle
 * keeps its slot, each of them is named after its own host, and the slots
 * in use are exactly as many as the handles.
 */
START_TEST(test_hosts_opening_many_clients_at_once_never_share_a_slot)
{
	struct tu_host h[3];

	host_start(&h[0], "h1", "noncoherent", "0");
	for (unsigned round = 0; round < 3; round++) {
		host_start_with(&h[1], "h2", "noncoherent", "0", "2000", NULL);
		host_start_with(&h[2], "h3", "noncoherent", "0", "2000", NULL);
		tu_host_send(&h[1], "many %u", MANY - 1);
		tu_host_send(&h[2], "many %u", MANY - 1);
		ck_assert_int_eq(tu_host_recv(&h[1]), MANY - 1);
		ck_assert_int_eq(tu_host_recv(&h[2]), MANY - 1);
		for (int i = 1; i < 3; i++) {
			ck_assert_int_eq(tu_host_do(&h[i], "alive"), MANY - 1);
			ck_assert_int_eq(tu_host_do(&h[i], "mine"), 1);
		}
		ck_assert_int_eq(tu_host_do(&h[0], "clients"), 2 * MANY + 1);
		for (int i = 1; i < 3; i++) {
			ck_assert_int_eq(tu_host_do(&h[i], "close"), 0);
			tu_host_end(&h[i]);
		}
	}
	ck_assert_int_eq(tu_host_do(&h[0], "close"), 0);
	tu_host_end(&h[0]);
}
END_TEST

/*
 * Two hosts take the same free node entry at once: h2 has read it free and
 * is stopped, in its entry's splitter, first before it looks at the door
 * (when h3 goes through, the door is closed when h2 goes on), then once it
 * closed the door in its own cache only (h3 finds it open and closes it
 * too, but entered last, so h2 loses at its last look).  Twice more with
 * h2's caches kept across the stop: right after its first look at the
 * door, open (its second look must find h3's door closed), and with the
 * door closed in its cache only (its last look must find h3's race word,
 * not its own still cached).  Each time each host has an entry of its
 * own: three nodes, every client named after its host.  Without the
 * splitter both hosts would take the entry (and the same range of slots);
 * without its second or last look, both would win.
 */
START_TEST(test_hosts_taking_one_free_node_entry_at_once_get_one_each)
{
	const char *stops[] = { "HOSTEMU_STOP=:node_split_enter", "HOSTEMU_STOP=:node_split_close",
			"HOSTEMU_STOP=:node_split_enter>!", "HOSTEMU_STOP=:node_split_close!" };

	for (unsigned i = 0; i < 4; i++) {
		struct tu_host h1, h2, h3;

		host_start(&h1, "h1", "noncoherent", "0");
		host_launch(&h2, "h2", "noncoherent", "0", "0", stops[i]);
		tu_host_send(&h2, "open");
		ck_assert_int_eq(tu_wait_stopped(h2.pid, 30), 0);
		host_start(&h3, "h3", "noncoherent", "0");
		ck_assert_int_eq(kill(h2.pid, SIGCONT), 0);
		ck_assert_int_eq(tu_host_recv(&h2), 0);
		ck_assert_int_eq(tu_host_do(&h1, "nodes"), 3);
		ck_assert_int_eq(tu_host_do(&h2, "many 2"), 2);
		ck_assert_int_eq(tu_host_do(&h3, "many 2"), 2);
		ck_assert_int_eq(tu_host_do(&h2, "mine"), 1);
		ck_assert_int_eq(tu_host_do(&h3, "mine"), 1);
		ck_assert_int_eq(tu_host_do(&h3, "put a 0 %u", KEYS), KEYS);
		ck_assert_int_eq(tu_host_do(&h2, "check a 0 %u", KEYS), KEYS);
		ck_assert_int_eq(tu_host_do(&h1, "clients"), 7);
		ck_assert_int_eq(tu_host_do(&h3, "close"), 0);
		ck_assert_int_eq(tu_host_do(&h2, "close"), 0);
		ck_assert_int_eq(tu_host_do(&h1, "close"), 0);
		tu_host_end(&h3);
		tu_host_end(&h2);
		tu_host_end(&h1);
		/* a new pool, with its node table empty again */
		tu_hosts_teardown();
		tu_hosts_setup();
	}
}
END_TEST

/* Ask @p h for @p what until it answers @p want, for 20 client timeouts at most. */
static void
host_await(struct tu_host *h, const char *what, long long want)
{
	double end = tu_now() + 20.0 * CLIENT_TIMEOUT_MS / 1000;
	long long got;

	while ((got = tu_host_do(h, "%s", what)) != want && tu_now() < end)
		tu_sleep_ms(LEASE_MS);
	ck_assert_msg(got == want, "%s on %s: %lld, waited for %lld", what, h->name, got, want);
}

/*
 * A host whose processes all die: the holder on another host revokes its
 * claims and frees its node entry, and a new host, for which the full node
 * table had no room, takes that entry and every slot of its range, the
 * dead host's included, and works.
 */
START_TEST(test_a_dead_hosts_slots_and_node_entry_are_reclaimed_and_reused)
{
	struct tu_host h[5];
	const char *names[] = { "h1", "h2", "h3", "h4", "h5" };

	for (int i = 0; i < 4; i++)
		host_start(&h[i], names[i], "noncoherent", "0");
	ck_assert_int_eq(tu_host_do(&h[0], "holds"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "many 3"), 3);
	ck_assert_int_eq(tu_host_do(&h[1], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[0], "nodes"), NODES);
	ck_assert_int_eq(kill(h[1].pid, SIGKILL), 0);
	ck_assert_int_ne(tu_reap(h[1].pid, 10), 0);
	fclose(h[1].to);
	fclose(h[1].from);
	host_await(&h[0], "nodes", NODES - 1);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 3);
	host_start(&h[4], names[4], "noncoherent", "0");
	ck_assert_int_eq(tu_host_do(&h[4], "many %u", MANY - 1), MANY - 1);
	ck_assert_int_eq(tu_host_do(&h[4], "alive"), MANY - 1);
	ck_assert_int_eq(tu_host_do(&h[4], "mine"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "nodes"), NODES);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 3 + MANY);
	ck_assert_int_eq(tu_host_do(&h[4], "put e 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "check e 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[4], "check a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[3], "verify"), 0);
	for (int i = 0; i < 5; i++) {
		if (i == 1)
			continue;
		ck_assert_int_eq(tu_host_do(&h[i], "close"), 0);
		tu_host_end(&h[i]);
	}
}
END_TEST

/*
 * A reader on another host is stopped inside mkv_get(), its pin taken,
 * past the client timeout: the holder revokes its claim, and when the
 * reader goes on, the get says MKV_E_EXPIRED instead of handing out a view
 * of pages the holder may have given away.  The reader knew its claim to
 * stand without looking (mkv_client_known()) only until half a timeout
 * after its last beat; whichever of its threads runs first after the stop,
 * the get looks.
 */
START_TEST(test_a_reader_stopped_in_a_get_past_the_client_timeout_gets_no_view)
{
	for (unsigned round = 0; round < 3; round++) {
		struct tu_host h1, h2;

		host_start(&h1, "h1", "noncoherent", "0");
		ck_assert_int_eq(tu_host_do(&h1, "put a%u 0 1", round), 1);
		host_start_with(&h2, "h2", "noncoherent", "0", "0", "HOSTEMU_STOP=src/get.c:");
		tu_host_send(&h2, "get a%u 0", round);
		ck_assert_int_eq(tu_wait_stopped(h2.pid, 30), 0);
		host_await(&h1, "clients", 1);
		ck_assert_int_eq(kill(h2.pid, SIGCONT), 0);
		ck_assert_int_eq(tu_host_recv(&h2), MKV_E_EXPIRED);
		ck_assert_int_eq(tu_host_do(&h2, "close"), 0);
		ck_assert_int_eq(tu_host_do(&h1, "close"), 0);
		tu_host_end(&h2);
		tu_host_end(&h1);
	}
}
END_TEST

/*
 * The holder's host is stopped past the client timeout: another host takes
 * the lease, revokes the stopped host's claims and frees its node entry,
 * which a new host then takes, with the slot of its first handle.  When
 * the stopped host resumes it knows it lost everything: none of its
 * handles holds a slot (the three whose owner words nobody rewrote
 * included) and a write fails with MKV_E_EXPIRED; h2 still holds the
 * lease, and the new host's slots and entry are still its own.
 */
START_TEST(test_a_host_stopped_past_the_client_timeout_writes_nothing_it_lost)
{
	struct tu_host h[5];
	const char *names[] = { "h1", "h2", "h3", "h4", "h5" };

	for (int i = 0; i < 4; i++)
		host_start(&h[i], names[i], "noncoherent", "0");
	ck_assert_int_eq(tu_host_do(&h[0], "holds"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "many 3"), 3);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(kill(h[0].pid, SIGSTOP), 0);
	/* forwarded to the stopped holder first, then served by h2 once the lease expired */
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[1], "holds"), 1);
	host_await(&h[1], "nodes", NODES - 1);
	host_start(&h[4], names[4], "noncoherent", "0");
	ck_assert_int_eq(tu_host_do(&h[4], "mine"), 1);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	/* its service thread runs a few rounds meanwhile */
	tu_sleep_ms(CLIENT_TIMEOUT_MS);
	ck_assert_int_eq(tu_host_do(&h[0], "alive"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "try z 0"), MKV_E_EXPIRED);
	ck_assert_int_eq(tu_host_do(&h[4], "mine"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "nodes"), NODES);
	ck_assert_int_eq(tu_host_do(&h[1], "clients"), NODES);
	ck_assert_int_eq(tu_host_do(&h[4], "put e 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "check e 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[4], "check a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[3], "check b 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[1], "holds"), 1);
	ck_assert_int_eq(tu_host_do(&h[3], "verify"), 0);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(tu_host_do(&h[i], "close"), 0);
		tu_host_end(&h[i]);
	}
}
END_TEST

/*
 * A new holder dies inside the write window of its takeover (stopped in
 * its rebuild of the page table, the first time it reaches src/pages.c,
 * then killed): its announcement stays in its node's entry for good.  The
 * next holder, on h3, waits for it until h2 is dead by its heartbeat,
 * writes, and revokes h2's claim; then h3 dies too.  A write on h4 must
 * still find a holder: a window whose holder's claim was revoked is void.
 * Were it counted for as long as the owner word names that claim (nobody
 * rewrites the owner word of a dead host's slot), every later holder would
 * wait for it, give the lease up and try again, and h4's write would find
 * no lease holder answering (the crash trials across hosts, t/hostcrash.sh,
 * met this after their holder kills).  Each host opens with @p open.
 */
static void
window_death(const char *open)
{
	const char *stop[4] = { NULL, "HOSTEMU_STOP=src/pages.c:", NULL, NULL };
	const char *name[4] = { "h1", "h2", "h3", "h4" };
	struct tu_host h[4];

	for (int i = 0; i < 4; i++) {
		host_launch(&h[i], name[i], "noncoherent", "0", "0", stop[i]);
		ck_assert_int_eq(tu_host_do(&h[i], "%s", open), 0);
	}
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[0], "holds"), 1);
	tu_host_kill(&h[0]);
	/* h2's write makes it take the lease over; it stops in the take */
	tu_host_send(&h[1], "put b 0 1");
	ck_assert_int_eq(tu_wait_stopped(h[1].pid, 60), 0);
	tu_host_kill(&h[1]);
	ck_assert_int_eq(tu_host_do(&h[2], "put c 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "holds"), 1);
	/* h1's and h2's claims revoked: h3 and h4 are the clients left */
	host_await(&h[2], "clients", 2);
	tu_host_kill(&h[2]);
	ck_assert_int_eq(tu_host_do(&h[3], "put d 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[3], "holds"), 1);
	ck_assert_int_eq(tu_host_do(&h[3], "check a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[3], "check c 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[3], "verify"), 0);
	ck_assert_int_eq(tu_host_do(&h[3], "close"), 0);
	tu_host_end(&h[3]);
}

START_TEST(test_a_holder_dead_in_its_write_window_holds_up_no_later_holder)
{
	window_death("open");
}
END_TEST

/*
 * The same with a client timeout of 40 lease periods (50 ms and 2 s): h3's
 * write waits a lease period and a client timeout for h2's window, longer
 * than 30 lease periods, and must still be answered, not time out.
 */
START_TEST(test_a_takeover_past_a_dead_window_fits_a_calls_wait)
{
	window_death("open - 50 2000");
}
END_TEST

static Suite *
hosts_suite(void)
{
	Suite *s = suite_create("hosts");
	TCase *tc = tcase_create("hosts");

	tcase_add_checked_fixture(tc, tu_hosts_setup, tu_hosts_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_three_hosts_share_a_noncoherent_pool);
	tcase_add_test(tc, test_three_hosts_share_a_noncoherent_pool_with_noisy_caches);
	tcase_add_test(tc, test_coherent_pool_across_hosts_reads_stale_values);
	tcase_add_test(tc, test_holder_killed_on_one_host_is_replaced_on_another);
	tcase_add_test(tc, test_live_hosts_keep_their_roles);
	tcase_add_test(tc, test_hosts_race_for_a_dead_holders_lease);
	tcase_add_test(tc, test_a_second_process_of_a_host_opens_behind_other_hosts_commits);
	tcase_add_test(tc, test_a_reader_stopped_in_a_txn_keeps_its_snapshot_across_hosts);
	tcase_add_test(tc, test_hosts_opening_many_clients_at_once_never_share_a_slot);
	tcase_add_test(tc, test_hosts_taking_one_free_node_entry_at_once_get_one_each);
	tcase_add_test(tc, test_a_dead_hosts_slots_and_node_entry_are_reclaimed_and_reused);
	tcase_add_test(tc, test_a_host_stopped_past_the_client_timeout_writes_nothing_it_lost);
	tcase_add_test(tc, test_a_reader_stopped_in_a_get_past_the_client_timeout_gets_no_view);
	tcase_add_test(tc, test_a_holder_dead_in_its_write_window_holds_up_no_later_holder);
	tcase_add_test(tc, test_a_takeover_past_a_dead_window_fits_a_calls_wait);
	suite_add_tcase(s, tc);
	return s;
}

int
main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--host") == 0)
		return tu_host_serve(host_cmd);
	return tu_run_suite(hosts_suite());
}
