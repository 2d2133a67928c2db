/* SPDX-License-Identifier: MIT */
/*
 * tu_redis.c -- Redis servers on loopback for the tests: standalone
 * servers and clusters of redis-server processes of this process.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "testutil.h"

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
