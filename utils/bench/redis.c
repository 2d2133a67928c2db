/* SPDX-License-Identifier: MIT */
/*
 * redis.c -- the Redis peer of the lookup, getsize and put subcommands:
 * what users of LMCache's remote backend run today.  A redis-server of the
 * bench's own, started on a Unix socket in a scratch directory, with no
 * TCP port and no persistence (no RDB snapshots, no AOF), so that it
 * does no more than hold the keys in memory; hiredis clients.  For the
 * remote subcommand, a Redis Cluster of one such node that serves every
 * slot, on a TCP port of loopback as well, where marukv's tier and the
 * peer both reach it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"

#define SERVER "redis-server"
#define START_NS 10000000000ULL   /* how long it may take to answer */

/* 1 if an executable prog is on $PATH (an empty entry is the current directory). */
static int on_path(const char *prog)
{
	const char *p = getenv("PATH");

	while (p && *p) {
		const char *end = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		char *dir = n ? strndup(p, n) : strdup(".");
		char *file = dir ? path_join(dir, prog) : NULL;
		int found = file && access(file, X_OK) == 0;

		free(dir);
		free(file);
		if (found)
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

/* The last line of the server's log, for a message; "" if there is none. */
static void log_tail(const char *log, char *buf, size_t len)
{
	int fd = open(log, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ssize_t n = 0;
	char *nl;

	buf[0] = '\0';
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		off_t off = st.st_size > (off_t)len - 1 ? st.st_size - (off_t)len + 1 : 0;

		n = pread(fd, buf, len - 1, off);
	}
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	nl = strrchr(buf, '\n');
	if (nl)
		memmove(buf, nl + 1, strlen(nl + 1) + 1);
}

static void server_exec(const struct redis_server *srv, const char *dir, pid_t parent,
		const char *cmd)
{
	char port[16];
	char *argv[] = {
		SERVER, "--port", port, "--unixsocket", srv->sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", (char *)dir,
		"--logfile", srv->log, "--daemonize", "no",
		srv->port ? "--bind" : NULL, "127.0.0.1", "--cluster-enabled", "yes", NULL,
	};
	int fd = open("/dev/null", O_RDWR);

	snprintf(port, sizeof(port), "%u", srv->port);

	/* Never outlive the bench, even if it is killed. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || fd < 0 ||
	    dup2(fd, STDIN_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0)
		_exit(127);
	closefrom(STDERR_FILENO + 1);
	execvp(SERVER, argv);
	fprintf(stderr, PROG " %s: %s: %s\n", cmd, SERVER, strerror(errno));
	_exit(127);
}

/* Connect, retrying until the server answers PING; 0, or -1 (reported). */
static int server_wait(struct redis_server *srv, const char *cmd)
{
	uint64_t t0 = now_ns();
	char tail[256];
	int ws;

	for (;;) {
		redisContext *c = redisConnectUnix(srv->sock);
		redisReply *r = c && !c->err ? redisCommand(c, "PING") : NULL;
		int up = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");

		if (r)
			freeReplyObject(r);
		redisFree(c);
		if (up)
			return 0;
		if (waitpid(srv->pid, &ws, WNOHANG) == srv->pid) {
			srv->pid = -1;
			log_tail(srv->log, tail, sizeof(tail));
			fprintf(stderr, PROG " %s: %s exited (status %d) before it answered%s%s\n",
					cmd, SERVER, WIFEXITED(ws) ? WEXITSTATUS(ws) : -1,
					*tail ? ": " : "", tail);
			return -1;
		}
		if (now_ns() - t0 > START_NS) {
			fprintf(stderr, PROG " %s: %s did not answer on %s within %llu s\n", cmd,
					SERVER, srv->sock, START_NS / 1000000000ULL);
			return -1;
		}
		sleep_ns(10000000);
	}
}

int redis_start(struct redis_server *srv, const char *dir, const char *cmd)
{
	struct sockaddr_un sun;
	pid_t parent = getpid();
	unsigned port = srv->port;

	*srv = (struct redis_server){ .pid = -1, .port = port };
	if (!on_path(SERVER)) {
		fprintf(stderr, PROG " %s: " SERVER " not found on PATH: install it (Debian:"
				" apt-get install redis-server), or leave the Redis peer out"
				" with --no-redis\n", cmd);
		return -1;
	}
	srv->sock = path_join(dir, "redis.sock");
	srv->log = path_join(dir, "redis.log");
	if (!srv->sock || !srv->log) {
		fprintf(stderr, PROG " %s: out of memory\n", cmd);
		redis_stop(srv, cmd);
		return -1;
	}
	if (strlen(srv->sock) >= sizeof(sun.sun_path)) {
		fprintf(stderr, PROG " %s: %s: too long for a Unix socket\n", cmd, srv->sock);
		redis_stop(srv, cmd);
		return -1;
	}
	/* A server that dies must fail our next call, not kill us with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	srv->pid = child_fork(cmd);
	if (srv->pid == 0)
		server_exec(srv, dir, parent, cmd);
	if (srv->pid < 0 || server_wait(srv, cmd) < 0) {
		redis_stop(srv, cmd);
		return -1;
	}
	return 0;
}

int redis_stop(struct redis_server *srv, const char *cmd)
{
	char tail[256];
	int rc = 0;

	if (srv->pid > 0) {
		kill(srv->pid, SIGTERM);
		rc = child_reap(srv->pid, cmd, SERVER, 0);
		if (rc > 0) {
			log_tail(srv->log, tail, sizeof(tail));
			fprintf(stderr, PROG " %s: %s exited with status %d%s%s\n", cmd, SERVER,
					rc, *tail ? ": " : "", tail);
		}
	}
	free(srv->sock);
	free(srv->log);
	*srv = (struct redis_server){ .pid = -1 };
	return rc == 0 ? 0 : -1;
}

redisContext *redis_connect(const struct redis_server *srv, const char *cmd)
{
	redisContext *c = srv->port ? redisConnect("127.0.0.1", (int)srv->port) :
			redisConnectUnix(srv->sock);

	if (!c || c->err) {
		fprintf(stderr, PROG " %s: connect to %s: %s\n", cmd, srv->port ? "127.0.0.1" :
				srv->sock, c ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	return c;
}

int redis_set_append(redisContext *c, const void *key, size_t klen, const void *val,
		size_t len, const char *cmd)
{
	if (redisAppendCommand(c, "SET %b %b", key, klen, val, len) != REDIS_OK) {
		fprintf(stderr, PROG " %s: Redis SET: %s\n", cmd, c->errstr);
		return -1;
	}
	return 0;
}

/* A reply that is the status want (OK...); 0, or -1 (reported). */
static int reply_status(redisContext *c, redisReply *r, const char *want, const char *cmd)
{
	int ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, want);

	if (!ok)
		fprintf(stderr, PROG " %s: Redis: %s\n", cmd, !r ? c->errstr :
				r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

int redis_replies(redisContext *c, size_t n, const char *cmd)
{
	for (size_t i = 0; i < n; i++) {
		void *r = NULL;

		if (redisGetReply(c, &r) != REDIS_OK)
			r = NULL;
		if (reply_status(c, r, "OK", cmd) < 0)
			return -1;
	}
	return 0;
}

int redis_flush(redisContext *c, const char *cmd)
{
	return reply_status(c, redisCommand(c, "FLUSHALL"), "OK", cmd);
}

/* Whether nothing listens on port of loopback now. */
static int port_free(unsigned port)
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

/*
 * A free port whose cluster bus port (+10000) is free too, both below the
 * kernel's ephemeral ports (32768 and up), where an outgoing connection
 * may take one; 0 if none was found.
 */
static unsigned free_port(void)
{
	uint64_t seed = now_ns() ^ (uint64_t)getpid() << 32;

	for (int tries = 0; tries < 200; tries++) {
		unsigned port = 20000 + (unsigned)(rng_next(&seed) % 2700);

		if (port_free(port) && port_free(port + 10000))
			return port;
	}
	return 0;
}

int redis_start_cluster(struct redis_server *srv, const char *dir, const char *cmd)
{
	uint64_t t0;
	redisContext *c;
	redisReply *r;

	if (!(srv->port = free_port())) {
		fprintf(stderr, PROG " %s: no free port on 127.0.0.1\n", cmd);
		return -1;
	}
	if (redis_start(srv, dir, cmd) < 0 || !(c = redis_connect(srv, cmd)))
		return redis_stop(srv, cmd), -1;
	r = redisCommand(c, "CLUSTER ADDSLOTSRANGE 0 16383");
	if (reply_status(c, r, "OK", cmd) < 0) {
		redisFree(c);
		return redis_stop(srv, cmd), -1;
	}
	for (t0 = now_ns();; sleep_ns(10000000)) {
		int ok;

		r = redisCommand(c, "CLUSTER INFO");
		ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok");
		if (r)
			freeReplyObject(r);
		if (ok)
			break;
		if (now_ns() - t0 > START_NS) {
			fprintf(stderr, PROG " %s: the cluster did not come up within %llu s\n", cmd,
					START_NS / 1000000000ULL);
			redisFree(c);
			return redis_stop(srv, cmd), -1;
		}
	}
	redisFree(c);
	return 0;
}
