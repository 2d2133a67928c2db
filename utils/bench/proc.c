/* SPDX-License-Identifier: MIT */
/*
 * proc.c -- child processes: memory shared with them, a start gate, fork
 * and reap, and crews of workers run in lockstep (see bench.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

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
