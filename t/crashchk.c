/* SPDX-License-Identifier: MIT */
/*
 * crashchk.c -- after a crash trial: reclaim what the dead left (with
 * marukv-gc or mkv_pool_reclaim) and check the pool; see t/crashdrv.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

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

		if ((rc = cd_open(path, 0, "a", &pool)) < 0) {
			cd_bad("reclaim: open: %s: %s", mkv_strerror(rc), mkv_errormsg());
			return -1;
		}
		memset(&rep, 0xa5, sizeof(rep));
		rc = mkv_pool_reclaim(pool, 0, &rep);
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
		setenv("MARUKV_NODE", "a", 1);
		execl(gc, gc, "--json", "-q", "reclaim", path, (char *)NULL);
		_exit(127);
	}
	watch_pids[CD_MAXCH] = pid;
	rc = tu_wait_for(pid, 20);
	if (rc == -2) {
		kill(pid, SIGKILL);
		(void)tu_wait(pid);
	}
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
	size_t ncl = 0, i;
	int rc;

	if ((rc = cd_open(path, MKV_RDONLY, "a", &pool)) < 0) {
		cd_bad("open after reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	rc = mkv_pool_clients(pool, cl, CD_CLIENTS + 1, &ncl);
	mkv_pool_close(&pool);
	if (rc < 0) {
		cd_bad("mkv_pool_clients: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	if (ncl <= 1)
		return 0;
	cd_bad("%zu clients besides the checker left after the reclaim run:", ncl - 1);
	for (i = 0; i < ncl && i < CD_CLIENTS + 1; i++)
		if (cl[i].pid != (uint32_t)getpid())
			printf("#   slot %u pid %u node %s alive %u rdonly %u holder %u pin %llu "
					"granted %llu beat age %lld ms\n", cl[i].slot, cl[i].pid,
					cl[i].node, cl[i].alive, cl[i].rdonly, cl[i].holder,
					(unsigned long long)cl[i].pin,
					(unsigned long long)cl[i].pages_granted,
					(long long)cl[i].heartbeat_age_ms);
	second_reclaim = 1;
	if ((rc = cd_open(path, 0, "a", &pool)) < 0) {
		cd_bad("open for a second reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	rc = mkv_pool_reclaim(pool, 0, &r1);
	tu_sleep_ms(CD_TIMEOUT + 200);
	if (rc == 0)
		rc = mkv_pool_reclaim(pool, 0, &r2);
	mkv_pool_close(&pool);
	if (rc < 0)
		cd_bad("mkv_pool_reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
	printf("# a holder kept open for the client timeout reclaimed: now %u clients %llu pages, "
			"%u ms later %u clients %llu pages %llu pins\n", r1.clients,
			(unsigned long long)r1.pages, CD_TIMEOUT + 200, r2.clients,
			(unsigned long long)r2.pages, (unsigned long long)r2.pins);
	return (long long)(r1.pages + r2.pages);
}

/*
 * The checks after the trial (see the top of the file); the number of
 * keys checked.
 */
unsigned long
check_pool(const char *path, int ntotal)
{
	static uint8_t acked[CD_MAXCH][CD_WMAX];   /* 1 + rec.del, 0: not acked */
	struct mkv_client cl[CD_CLIENTS + 1];
	struct mkv_pool *pool;
	struct mkv_verify rep;
	struct mkv_stat st;
	char key[64];
	size_t klen, ncl = 0, i;
	unsigned long checked = 0, present = 0, lost = 0, resurrected = 0;
	int rc, w, n, r;
	unsigned idx;

	memset(acked, 0, sizeof(acked));
	n = cd_rec_count();
	for (r = 0; r < n; r++)
		if (sh->acked[r].valid && sh->acked[r].who < CD_MAXCH && sh->acked[r].idx < CD_WMAX)
			acked[sh->acked[r].who][sh->acked[r].idx] = (uint8_t)(1 + sh->acked[r].del);

	rc = cd_open(path, MKV_RDONLY | MKV_VERIFY, "a", &pool);
	if (rc < 0) {
		cd_bad("checker open: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	/* only the checker is left */
	rc = mkv_pool_clients(pool, cl, CD_CLIENTS + 1, &ncl);
	if (rc < 0)
		cd_bad("mkv_pool_clients: %s: %s", mkv_strerror(rc), mkv_errormsg());
	else if (ncl != 1) {
		cd_bad("%zu clients after reclaim, expected only the checker:", ncl);
		for (i = 0; i < ncl && i < CD_CLIENTS + 1; i++)
			printf("#   slot %u pid %u node %s alive %u rdonly %u holder %u pin %llu "
					"granted %llu beat age %lld ms\n", cl[i].slot, cl[i].pid,
					cl[i].node, cl[i].alive, cl[i].rdonly, cl[i].holder,
					(unsigned long long)cl[i].pin,
					(unsigned long long)cl[i].pages_granted,
					(long long)cl[i].heartbeat_age_ms);
	}

	memset(&rep, 0, sizeof(rep));
	rc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &rep);
	if (rc != 0 || rep.problems != 0)
		cd_bad("mkv_pool_verify(DEEP) = %d (%s): %llu problems, first \"%.200s\"; %s", rc,
				mkv_strerror(rc), (unsigned long long)rep.problems,
				rep.first_problem, rc < 0 && rc != MKV_E_CORRUPT ? mkv_errormsg() : "");
	if (rc == 0 && rep.pages_leaked != 0)
		cd_bad("mkv_pool_verify: %llu pages leaked after reclaim",
				(unsigned long long)rep.pages_leaked);
	if (rc == 0 && rep.checksums_checked != rep.entries)
		cd_bad("mkv_pool_verify(DEEP) checked %llu checksums of %llu entries",
				(unsigned long long)rep.checksums_checked,
				(unsigned long long)rep.entries);

	/* every key tried: absent or whole; acknowledged: present unless deleted */
	for (w = 0; w < ntotal; w++) {
		if (sh->ch[w].role != R_WRITER)
			continue;
		for (idx = 0; idx < sh->ch[w].next && idx < CD_WMAX; idx++) {
			klen = cd_key(key, (unsigned)w, idx);
			rc = tu_check(pool, key, klen, cd_vlen(key, klen));
			checked++;
			if (rc == 0)
				present++;
			if (rc != 0 && rc != MKV_E_NOTFOUND) {
				cd_bad("key %s: %s", key, rc == 1 ? "wrong length" : rc == 2 ?
						"wrong bytes" : rc == 3 ? "release failed" :
						mkv_strerror(rc));
				continue;
			}
			switch (acked[w][idx]) {
			case 1:  /* acknowledged, never deleted */
				if (rc != 0) {
					lost++;
					cd_bad("acknowledged key %s (never deleted) is gone", key);
				}
				break;
			case 3:  /* deleted */
				if (rc == 0) {
					resurrected++;
					cd_bad("key %s was deleted successfully but is there", key);
				}
				break;
			default: /* not acknowledged, or a delete of unknown outcome */
				break;
			}
		}
	}

	memset(&st, 0, sizeof(st));
	rc = mkv_pool_stat(pool, &st);
	if (rc < 0) {
		cd_bad("stat: %s: %s", mkv_strerror(rc), mkv_errormsg());
	} else {
		if (st.pages_used + st.pages_free + st.pages_quarantined + st.pages_granted !=
				st.pages_total)
			cd_bad("pages: used %llu + free %llu + quarantined %llu + granted %llu "
					"!= total %llu", (unsigned long long)st.pages_used,
					(unsigned long long)st.pages_free,
					(unsigned long long)st.pages_quarantined,
					(unsigned long long)st.pages_granted,
					(unsigned long long)st.pages_total);
		if (st.pages_granted != 0)
			cd_bad("%llu pages still granted after reclaim with no writer left",
					(unsigned long long)st.pages_granted);
		if (st.entries != present)
			cd_bad("the registry has %llu entries, %lu of the keys tried are there",
					(unsigned long long)st.entries, present);
		if (st.evictions != 0)
			printf("# note: %llu evictions\n", (unsigned long long)st.evictions);
		if (verbose)
			printf("# stat: used %llu free %llu quarantined %llu granted %llu total %llu "
					"entries %llu clients %u\n", (unsigned long long)st.pages_used,
					(unsigned long long)st.pages_free,
					(unsigned long long)st.pages_quarantined,
					(unsigned long long)st.pages_granted,
					(unsigned long long)st.pages_total,
					(unsigned long long)st.entries, st.clients);
	}
	mkv_pool_close(&pool);

	/* still usable: a writer takes new values after all that */
	rc = cd_open(path, 0, "a", &pool);
	if (rc < 0) {
		cd_bad("open for writing after the trial: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return checked;
	}
	for (i = 0; i < 8; i++) {
		klen = (size_t)snprintf(key, sizeof(key), "after-%zu", i);
		if ((rc = tu_publish(pool, key, klen, 2 * CD_PAGE)) != 0)
			cd_bad("publish %s after the trial: %s: %s", key, mkv_strerror(rc),
					mkv_errormsg());
		else if ((rc = tu_check(pool, key, klen, 2 * CD_PAGE)) != 0)
			cd_bad("check %s after the trial: %d", key, rc);
	}
	memset(&rep, 0, sizeof(rep));
	rc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &rep);
	if (rc != 0)
		cd_bad("mkv_pool_verify(DEEP) after new writes = %d (%s): \"%.200s\"", rc,
				mkv_strerror(rc), rep.first_problem);
	mkv_pool_close(&pool);
	if (lost || resurrected)
		printf("# %lu acknowledged keys lost, %lu deleted keys back\n", lost, resurrected);
	printf("# keys tried %lu, present %lu\n", checked, present);
	return checked;
}

