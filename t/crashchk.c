/* SPDX-License-Identifier: MIT */
/*
 * crashchk.c -- after a crash trial: reclaim what the dead left (with
 * marukv-gc or mkv_pool_reclaim) and check the pool; see t/crashdrv.c.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crashdrv.h"

/* JSON integer "key": N in @p text; -1 if absent. */
static long long
json_int(const char *text, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(text, pat);
	if (p == NULL)
		return -1;
	return strtoll(p + strlen(pat), NULL, 10);
}

/* Run marukv-gc (or mkv_pool_reclaim); the pages it reclaimed, -1 on failure. */
long long
run_reclaim(const char *gc, const char *dir, const char *path, long long *clients,
		long long *readers)
{
	char out[512], text[4096];
	long long pages;
	ssize_t n;
	pid_t pid;
	int fd, rc;

	*clients = *readers = -1;
	if (gc == NULL) {
		struct mkv_pool *pool;
		struct mkv_reclaim rep;

		if ((rc = cd_open(path, 0, drv_node, &pool)) < 0) {
			cd_bad("reclaim: open: %s: %s", mkv_strerror(rc), mkv_errormsg());
			return -1;
		}
		memset(&rep, 0xa5, sizeof(rep));
		rc = mkv_pool_reclaim(pool, 0, &rep);
		cd_rc(C_RECLAIM, rc, path);
		mkv_pool_close(&pool);
		if (rc < 0) {
			cd_bad("mkv_pool_reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
			return -1;
		}
		*clients = rep.clients;
		*readers = rep.readers;
		return (long long)rep.pages;
	}
	snprintf(out, sizeof(out), "%s/gc.out", dir);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("MARUKV_NODE", drv_node, 1);
		execl(gc, gc, "--json", "-q", "reclaim", path, (char *)NULL);
		_exit(127);
	}
	watch_pids[CD_MAXCH] = pid;
	rc = tu_reap(pid, 20);
	watch_pids[CD_MAXCH] = 0;
	text[0] = '\0';
	fd = open(out, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		text[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	if (rc != 0) {
		cd_bad("%s reclaim %s exited with %d; its output:", gc, path, rc);
		printf("#   %s\n", text);
		return -1;
	}
	pages = json_int(text, "pages");
	*clients = json_int(text, "clients");
	*readers = json_int(text, "readers");
	if (pages < 0)
		cd_bad("no \"pages\" in marukv-gc's output: %s", text);
	if (verbose)
		printf("# gc: %s", text);
	return pages;
}

/* The clients of @p cl (n of them, as mkv_pool_clients() counted), but @p skip's. */
static void
print_clients(const struct mkv_client *cl, size_t n, pid_t skip)
{
	size_t i;

	for (i = 0; i < n && i < CD_CLIENTS + 1; i++)
		if (cl[i].pid != (uint32_t)skip)
			printf("#   slot %u pid %u node %s alive %u rdonly %u holder %u pin %llu "
					"granted %llu beat age %lld ms\n", cl[i].slot, cl[i].pid,
					cl[i].node, cl[i].alive, cl[i].rdonly, cl[i].holder,
					(unsigned long long)cl[i].pin,
					(unsigned long long)cl[i].pages_granted,
					(long long)cl[i].heartbeat_age_ms);
}

/*
 * Dead clients left after the reclaim: listed as a failure; then a holder
 * of our own watches their heartbeats for the client timeout and reclaims
 * them, so that the other checks still run.  The pages that reclaimed.
 */
int second_reclaim;

long long
leftover_clients(const char *path)
{
	struct mkv_client cl[CD_CLIENTS + 1];
	struct mkv_reclaim r1, r2;
	struct mkv_pool *pool;
	size_t ncl = 0;
	int rc;

	if ((rc = cd_open(path, MKV_RDONLY, drv_node, &pool)) < 0) {
		cd_bad("open after reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	rc = mkv_pool_clients(pool, cl, CD_CLIENTS + 1, &ncl);
	cd_rc(C_CLIENTS, rc, path);
	mkv_pool_close(&pool);
	if (rc < 0) {
		cd_bad("mkv_pool_clients: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	if (ncl <= 1)
		return 0;
	cd_bad("%zu clients besides the checker left after the reclaim run:", ncl - 1);
	print_clients(cl, ncl, getpid());
	second_reclaim = 1;
	if ((rc = cd_open(path, 0, drv_node, &pool)) < 0) {
		cd_bad("open for a second reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	rc = mkv_pool_reclaim(pool, 0, &r1);
	tu_sleep_ms(sh->cfg.timeout_ms + 200);
	if (rc == 0)
		rc = mkv_pool_reclaim(pool, 0, &r2);
	mkv_pool_close(&pool);
	if (rc < 0)
		cd_bad("mkv_pool_reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
	printf("# a holder kept open for the client timeout reclaimed: now %u clients %llu pages, "
			"%u ms later %u clients %llu pages %llu pins\n", r1.clients,
			(unsigned long long)r1.pages, sh->cfg.timeout_ms + 200, r2.clients,
			(unsigned long long)r2.pages, (unsigned long long)r2.pins);
	return (long long)(r1.pages + r2.pages);
}

/* Only the checker is left in the client table. */
static void
check_clients(struct mkv_pool *pool, const char *path)
{
	struct mkv_client cl[CD_CLIENTS + 1];
	size_t ncl = 0;
	int rc = mkv_pool_clients(pool, cl, CD_CLIENTS + 1, &ncl);

	cd_rc(C_CLIENTS, rc, path);
	if (rc < 0) {
		cd_bad("mkv_pool_clients: %s: %s", mkv_strerror(rc), mkv_errormsg());
	} else if (ncl != 1) {
		cd_bad("%zu clients after reclaim, expected only the checker:", ncl);
		print_clients(cl, ncl, 0);
	}
}

/* mkv_pool_verify(MKV_VERIFY_DEEP): no problem, no leaked page, every checksum checked. */
static void
check_verify(struct mkv_pool *pool, const char *when)
{
	struct mkv_verify rep;
	int rc;

	memset(&rep, 0, sizeof(rep));
	rc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &rep);
	cd_rc(C_VERIFY, rc, when);
	if (rc != 0 || rep.problems != 0)
		cd_bad("mkv_pool_verify(DEEP) %s = %d (%s): %llu problems, first \"%.200s\"; %s",
				when, rc, mkv_strerror(rc), (unsigned long long)rep.problems,
				rep.first_problem, rc < 0 && rc != MKV_E_CORRUPT ? mkv_errormsg() : "");
	if (rc == 0 && rep.pages_leaked != 0)
		cd_bad("mkv_pool_verify %s: %llu pages leaked", when,
				(unsigned long long)rep.pages_leaked);
	if (rc == 0 && rep.checksums_checked != rep.entries)
		cd_bad("mkv_pool_verify(DEEP) %s checked %llu checksums of %llu entries", when,
				(unsigned long long)rep.checksums_checked,
				(unsigned long long)rep.entries);
}

/*
 * Every key any writer tried: absent or whole; none deleted successfully
 * is back.  An acknowledged key that is gone without a successful delete
 * (never deleted, or its delete said NOTFOUND) was lost, unless the
 * holder evicted it: there may be no more of those than keys evicted,
 * and none in a trial that evicted nothing.  Nor may more keys have been
 * evicted than are gone without a successful delete.  The keys checked;
 * those present into *present.
 */
static unsigned long
check_keys(struct mkv_pool *pool, int ntotal, uint64_t evictions, unsigned long *present)
{
	static uint8_t acked[CD_MAXCH][CD_WMAX];   /* 1 + rec.del, 0: not acked */
	static char gone[10][96];
	char key[64];
	size_t klen;
	unsigned long checked = 0, lost = 0, nf = 0, gone_undeleted = 0;
	unsigned idx;
	int rc, w, r, n = cd_rec_count();

	memset(acked, 0, sizeof(acked));
	for (r = 0; r < n; r++)
		if (sh->acked[r].valid && sh->acked[r].who < CD_MAXCH && sh->acked[r].idx < CD_WMAX)
			acked[sh->acked[r].who][sh->acked[r].idx] = (uint8_t)(1 + sh->acked[r].del);
	*present = 0;
	for (w = 0; w < ntotal; w++) {
		if (sh->ch[w].role != R_WRITER)
			continue;
		for (idx = 0; idx < sh->ch[w].next && idx < CD_WMAX; idx++) {
			klen = cd_key(key, (unsigned)w, idx);
			rc = tu_check(pool, key, klen, cd_vlen(key, klen));
			checked++;
			if (rc == 0)
				(*present)++;
			gone_undeleted += rc == MKV_E_NOTFOUND && acked[w][idx] != 3;
			if (rc != 0 && rc != MKV_E_NOTFOUND) {
				cd_bad("key %s: %s", key, rc == 1 ? "wrong length" : rc == 2 ?
						"wrong bytes" : rc == 3 ? "release failed" :
						mkv_strerror(rc));
				continue;
			}
			switch (acked[w][idx]) {
			case 1:  /* acknowledged, never deleted */
			case 4:  /* acknowledged, its delete said NOTFOUND */
				if (rc == 0 && acked[w][idx] == 4)
					cd_bad("key %s is there, but its delete said NOTFOUND", key);
				if (rc == 0)
					break;
				nf += acked[w][idx] == 4;
				if (lost < 10)
					snprintf(gone[lost], sizeof(gone[lost]), "%s%s", key,
							acked[w][idx] == 4 ? " (delete: NOTFOUND)" : "");
				lost++;
				break;
			case 3:  /* deleted */
				if (rc == 0)
					cd_bad("key %s was deleted successfully but is there", key);
				break;
			default: /* not acknowledged, or a delete of unknown outcome */
				break;
			}
		}
	}
	if (lost > evictions) {
		cd_bad("%lu acknowledged keys are gone without a successful delete (%lu of them "
				"said NOTFOUND to one), and %llu keys were evicted; the first:", lost, nf,
				(unsigned long long)evictions);
		for (r = 0; r < 10 && (unsigned long)r < lost; r++)
			printf("#   %s\n", gone[r]);
	}
	if (evictions > gone_undeleted)
		cd_bad("%llu keys were evicted, but only %lu of the keys tried are gone without a "
				"successful delete", (unsigned long long)evictions, gone_undeleted);
	printf("# keys tried %lu, present %lu; acknowledged and gone %lu, evicted %llu\n",
			checked, *present, lost, (unsigned long long)evictions);
	return checked;
}

/* Still usable: the pool takes and returns new values after all that. */
static void
check_after(const char *path)
{
	struct mkv_pool *pool;
	struct mkv_evict ev;
	char key[64];
	size_t klen;
	int rc, i;

	rc = cd_open(path, 0, drv_node, &pool);
	cd_rc(C_OPEN, rc, path);
	if (rc < 0) {
		cd_bad("open for writing after the trial: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return;
	}
	/* a torture trial may leave the pool full */
	if (sh->cfg.torture) {
		rc = mkv_pool_evict(pool, 25, 0, &ev);
		if (cd_rc(C_EVICT, rc, path) == 0 && rc < 0)
			cd_bad("evict after the trial: %s: %s", mkv_strerror(rc), mkv_errormsg());
	}
	for (i = 0; i < 8; i++) {
		klen = (size_t)snprintf(key, sizeof(key), "after-%d", i);
		if ((rc = tu_publish(pool, key, klen, 2 * CD_PAGE)) != 0)
			cd_bad("publish %s after the trial: %s: %s", key, mkv_strerror(rc),
					mkv_errormsg());
		else if ((rc = tu_check(pool, key, klen, 2 * CD_PAGE)) != 0)
			cd_bad("check %s after the trial: %d", key, rc);
	}
	check_verify(pool, "after new writes");
	mkv_pool_close(&pool);
}

unsigned long
check_pool(const char *path, int ntotal, uint64_t *evictions)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	unsigned long checked, present = 0;
	int rc;

	*evictions = 0;
	rc = cd_open(path, MKV_RDONLY | MKV_VERIFY, drv_node, &pool);
	cd_rc(C_OPEN, rc, path);
	if (rc < 0) {
		cd_bad("checker open: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	check_clients(pool, path);
	check_verify(pool, "after the reclaim");
	memset(&st, 0, sizeof(st));
	rc = mkv_pool_stat(pool, &st);
	cd_rc(C_STAT, rc, path);
	if (rc < 0) {
		cd_bad("stat: %s: %s", mkv_strerror(rc), mkv_errormsg());
		mkv_pool_close(&pool);
		return 0;
	}
	check_pages(&st, "after the reclaim");
	if (st.pages_granted != 0)
		cd_bad("%llu pages still granted after reclaim with no writer left",
				(unsigned long long)st.pages_granted);
	*evictions = st.evictions;
	checked = check_keys(pool, ntotal, st.evictions, &present);
	if (st.entries != present)
		cd_bad("the registry has %llu entries, %lu of the keys tried are there",
				(unsigned long long)st.entries, present);
	if (verbose)
		printf("# stat: used %llu free %llu quarantined %llu granted %llu total %llu "
				"entries %llu clients %u\n", (unsigned long long)st.pages_used,
				(unsigned long long)st.pages_free,
				(unsigned long long)st.pages_quarantined,
				(unsigned long long)st.pages_granted,
				(unsigned long long)st.pages_total,
				(unsigned long long)st.entries, st.clients);
	mkv_pool_close(&pool);
	check_after(path);
	return checked;
}
