/* SPDX-License-Identifier: MIT */
/*
 * redisproxy.c -- a fault-injecting proxy in front of a real Redis Cluster
 * node (redisproxy.h).
 *
 * One thread accepts; one thread per connection reads the client's
 * commands (hiredis's reader parses them), answers CLUSTER SLOTS itself,
 * sends every other command to the node on a connection of its own
 * (redisCommandArgv) and writes the node's reply back, encoded again, as
 * the mode says at that moment.  The threads that drip or stall look at
 * the stop flag between bytes; tp_stop() shuts every socket down, so that
 * a thread blocked in a read or write returns, and joins them all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redisproxy.h"

#define TP_CONNS 64
#define TP_SILENT 100
#define TP_DRIP_MS 200
#define TP_ENDLESS_MS 50

struct tp_conn {
	struct tp_proxy *tp;
	pthread_t thread;
	int fd;
};

struct tp_proxy {
	int lfd;
	unsigned port, node_port;
	pthread_t acceptor;
	pthread_mutex_t lock;
	int stop, mode;
	unsigned long commands;
	struct tp_conn conns[TP_CONNS];
	unsigned nconns;
	int silent[TP_SILENT];
	unsigned silent_port[TP_SILENT];
};

/* A listening socket on a free loopback port; its port in *port.  The fd, or -1. */
static int
listener(unsigned *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static bool
stopping(struct tp_proxy *tp)
{
	return __atomic_load_n(&tp->stop, __ATOMIC_ACQUIRE);
}

/* Sleep ms, or less if the proxy stops meanwhile. */
static void
nap(struct tp_proxy *tp, int ms)
{
	for (; ms > 0 && !stopping(tp); ms -= 10)
		usleep(10000);
}

/* Write all n bytes; false if the connection went. */
static bool
put(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Write n bytes one at a time, ms apart, while the proxy runs; false if it stopped or the connection went. */
static bool
drip(struct tp_proxy *tp, int fd, const char *p, size_t n, int ms)
{
	for (size_t i = 0; i < n; i++) {
		if (stopping(tp) || !put(fd, p + i, 1))
			return false;
		nap(tp, ms);
	}
	return !stopping(tp);
}

/* Append s (n bytes) to the growing buffer *b (*len used, *cap allocated). */
static void
add(char **b, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n > *cap) {
		*cap = (*len + n) * 2;
		*b = realloc(*b, *cap);
		if (!*b)
			abort();
	}
	memcpy(*b + *len, s, n);
	*len += n;
}

/* Reply r in RESP, appended to the buffer. */
static void
encode(const redisReply *r, char **b, size_t *len, size_t *cap)
{
	char head[64];
	int n;

	switch (r->type) {
	case REDIS_REPLY_STRING:
		n = snprintf(head, sizeof(head), "$%zu\r\n", r->len);
		add(b, len, cap, head, (size_t)n);
		add(b, len, cap, r->str, r->len);
		add(b, len, cap, "\r\n", 2);
		return;
	case REDIS_REPLY_STATUS:
	case REDIS_REPLY_ERROR:
		add(b, len, cap, r->type == REDIS_REPLY_STATUS ? "+" : "-", 1);
		add(b, len, cap, r->str, r->len);
		add(b, len, cap, "\r\n", 2);
		return;
	case REDIS_REPLY_INTEGER:
		n = snprintf(head, sizeof(head), ":%lld\r\n", r->integer);
		add(b, len, cap, head, (size_t)n);
		return;
	case REDIS_REPLY_ARRAY:
		n = snprintf(head, sizeof(head), "*%zu\r\n", r->elements);
		add(b, len, cap, head, (size_t)n);
		for (size_t i = 0; i < r->elements; i++)
			encode(r->element[i], b, len, cap);
		return;
	default:
		add(b, len, cap, "$-1\r\n", 5);
	}
}

/* CLUSTER SLOTS as the proxy answers it: every slot its own, or spread over the silent nodes. */
static void
slots_reply(struct tp_proxy *tp, int mode, char **b, size_t *len, size_t *cap)
{
	unsigned n = mode == TP_SILENT_MAP ? TP_SILENT : 1, per = 16384 / n;
	char s[160];
	int k;

	k = snprintf(s, sizeof(s), "*%u\r\n", n);
	add(b, len, cap, s, (size_t)k);
	for (unsigned i = 0; i < n; i++) {
		unsigned lo = i * per, hi = i == n - 1 ? 16383 : lo + per - 1;
		unsigned port = mode == TP_SILENT_MAP ? tp->silent_port[i] : tp->port;

		k = snprintf(s, sizeof(s), "*3\r\n:%u\r\n:%u\r\n*2\r\n$9\r\n127.0.0.1\r\n:%u\r\n",
				lo, hi, port);
		add(b, len, cap, s, (size_t)k);
	}
}

/* Give reply buffer b (len bytes) to the client as the mode says; false to close the connection. */
static bool
answer(struct tp_proxy *tp, int fd, int mode, const char *b, size_t len)
{
	static const char huge[] = "$10485760\r\n", giga[] = "$10737418240\r\n";
	char o = 'O';

	switch (mode) {
	case TP_DRIP:
		return drip(tp, fd, b, len, TP_DRIP_MS);
	case TP_STALL:
		put(fd, b, len / 2);
		while (!stopping(tp))
			nap(tp, 100);
		return false;
	case TP_CUT:
		put(fd, b, len / 2);
		return false;
	case TP_TWICE: {
		/* in one write, as a node that answered twice would */
		char *two = malloc(2 * len + 1);
		bool ok = two != NULL;

		if (ok) {
			memcpy(two, b, len);
			memcpy(two + len, b, len);
			ok = put(fd, two, 2 * len);
		}
		free(two);
		return ok;
	}
	case TP_HUGE:
	case TP_GIGA:
		if (!put(fd, mode == TP_HUGE ? huge : giga, mode == TP_HUGE ? sizeof(huge) - 1 :
				sizeof(giga) - 1))
			return false;
		while (drip(tp, fd, "x", 1, TP_DRIP_MS))
			;
		return false;
	case TP_ENDLESS:
		if (!put(fd, "+", 1))
			return false;
		while (drip(tp, fd, &o, 1, TP_ENDLESS_MS))
			;
		return false;
	default:
		return put(fd, b, len);
	}
}

/* One client's connection: its commands, answered, until it goes or the proxy stops. */
static void *
conn_main(void *arg)
{
	struct tp_conn *c = arg;
	struct tp_proxy *tp = c->tp;
	redisReader *rd = redisReaderCreate();
	redisContext *node = NULL;
	char in[65536], *out = NULL;
	size_t cap = 0;

	while (rd && !stopping(tp)) {
		redisReply *req = NULL, *rep = NULL;
		const char *argv[64];
		size_t argl[64], len = 0;
		ssize_t got;
		void *v;
		int mode;

		if (redisReaderGetReply(rd, &v) != REDIS_OK)
			break;
		if (!(req = v)) {
			got = recv(c->fd, in, sizeof(in), 0);
			if (got <= 0 || redisReaderFeed(rd, in, (size_t)got) != REDIS_OK)
				break;
			continue;
		}
		pthread_mutex_lock(&tp->lock);
		tp->commands++;
		mode = tp->mode;
		pthread_mutex_unlock(&tp->lock);
		if (req->type != REDIS_REPLY_ARRAY || req->elements == 0 || req->elements > 64) {
			freeReplyObject(req);
			break;
		}
		for (size_t i = 0; i < req->elements; i++) {
			argv[i] = req->element[i]->str;
			argl[i] = req->element[i]->len;
		}
		if (mode == TP_DEAD) {
			len = 0;
			mode = TP_STALL;
		} else if (req->elements == 2 && strcasecmp(argv[0], "CLUSTER") == 0 &&
		    strcasecmp(argv[1], "SLOTS") == 0) {
			slots_reply(tp, mode, &out, &len, &cap);
			mode = TP_PASS;
		} else if (mode == TP_HUGE || mode == TP_GIGA || mode == TP_ENDLESS) {
			len = 0;
		} else {
			if (!node)
				node = redisConnect("127.0.0.1", (int)tp->node_port);
			if (node && !node->err)
				rep = redisCommandArgv(node, (int)req->elements, argv, argl);
			if (!rep) {
				freeReplyObject(req);
				break;
			}
			encode(rep, &out, &len, &cap);
			freeReplyObject(rep);
			if (mode == TP_SILENT_MAP)
				mode = TP_PASS;
		}
		freeReplyObject(req);
		if (!answer(tp, c->fd, mode, out, len))
			break;
	}
	redisFree(node);
	redisReaderFree(rd);
	free(out);
	shutdown(c->fd, SHUT_RDWR);
	return NULL;
}

static void *
accept_main(void *arg)
{
	struct tp_proxy *tp = arg;

	while (!stopping(tp)) {
		struct pollfd pf = { .fd = tp->lfd, .events = POLLIN };
		struct tp_conn *c;
		int fd;

		if (poll(&pf, 1, 50) <= 0)
			continue;
		if ((fd = accept4(tp->lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			continue;
		pthread_mutex_lock(&tp->lock);
		if (tp->nconns == TP_CONNS || stopping(tp)) {
			pthread_mutex_unlock(&tp->lock);
			close(fd);
			continue;
		}
		c = &tp->conns[tp->nconns];
		*c = (struct tp_conn){ .tp = tp, .fd = fd };
		if (pthread_create(&c->thread, NULL, conn_main, c) == 0)
			tp->nconns++;
		else
			close(fd);
		pthread_mutex_unlock(&tp->lock);
	}
	return NULL;
}

int
tp_start(unsigned node_port, struct tp_proxy **out, unsigned *port)
{
	struct tp_proxy *tp = calloc(1, sizeof(*tp));

	*out = NULL;
	if (!tp)
		return -1;
	pthread_mutex_init(&tp->lock, NULL);
	tp->node_port = node_port;
	for (unsigned i = 0; i < TP_SILENT; i++)
		tp->silent[i] = -1;
	/* connects to these succeed (the kernel's backlog takes them); nothing ever answers */
	for (unsigned i = 0; i < TP_SILENT; i++)
		if ((tp->silent[i] = listener(&tp->silent_port[i])) < 0)
			goto fail;
	if ((tp->lfd = listener(&tp->port)) < 0)
		goto fail;
	if (pthread_create(&tp->acceptor, NULL, accept_main, tp) != 0) {
		close(tp->lfd);
		goto fail;
	}
	*port = tp->port;
	*out = tp;
	return 0;
fail:
	for (unsigned i = 0; i < TP_SILENT; i++)
		if (tp->silent[i] >= 0)
			close(tp->silent[i]);
	pthread_mutex_destroy(&tp->lock);
	free(tp);
	return -1;
}

void
tp_mode(struct tp_proxy *tp, enum tp_mode mode)
{
	pthread_mutex_lock(&tp->lock);
	tp->mode = mode;
	pthread_mutex_unlock(&tp->lock);
}

unsigned long
tp_commands(struct tp_proxy *tp)
{
	unsigned long n;

	pthread_mutex_lock(&tp->lock);
	n = tp->commands;
	pthread_mutex_unlock(&tp->lock);
	return n;
}

void
tp_stop(struct tp_proxy *tp)
{
	if (!tp)
		return;
	__atomic_store_n(&tp->stop, 1, __ATOMIC_RELEASE);
	pthread_join(tp->acceptor, NULL);
	for (unsigned i = 0; i < tp->nconns; i++)
		shutdown(tp->conns[i].fd, SHUT_RDWR);
	for (unsigned i = 0; i < tp->nconns; i++) {
		pthread_join(tp->conns[i].thread, NULL);
		close(tp->conns[i].fd);
	}
	for (unsigned i = 0; i < TP_SILENT; i++)
		close(tp->silent[i]);
	close(tp->lfd);
	pthread_mutex_destroy(&tp->lock);
	free(tp);
}
