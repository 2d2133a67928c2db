/* SPDX-License-Identifier: MIT */
/*
 * tu_proc.c -- time, child processes and their reasons for failing,
 * children stepped through a scenario, and what they hold for others.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "testutil.h"

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

int
tu_lock_writers(const char *path)
{
	char *super = tu_path_in(path, "super");
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
