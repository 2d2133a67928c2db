/* SPDX-License-Identifier: MIT */
/*
 * tu_hosts.c -- preloaded objects (fault injection, t/faultinject.c) and
 * emulated hosts (t/hostemu.c): starting them, talking to them, and
 * the checksum of frames from Debian's b3sum.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "testutil.h"

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
