/* SPDX-License-Identifier: MIT */
/*
 * redisproxy.h -- a fault-injecting proxy in front of a real Redis Cluster
 * node, for the tests of the remote tier's bounds (t/check_remote.c).
 *
 * The proxy listens on a loopback port and answers CLUSTER SLOTS itself:
 * every slot is its own, so a client sends it everything.  Every other
 * command goes to the real node behind it, and the node's reply comes
 * back as the proxy's mode says.  Keys of other nodes' slots get the
 * node's -MOVED, which sends the client to that node directly: a test
 * uses keys of the node's slots (a hash tag).
 */
#ifndef TU_REDISPROXY_H
#define TU_REDISPROXY_H

enum tp_mode {
	TP_PASS,        /* the node's reply as it is */
	TP_DRIP,        /* the reply, a byte every 200 ms */
	TP_STALL,       /* the reply's first half, then nothing while the connection lasts */
	TP_CUT,         /* the reply's first half, then the connection closed */
	TP_HUGE,        /* "$10485760\r\n" whatever the node said, then a byte every 200 ms */
	TP_GIGA,        /* "$10737418240\r\n", then a byte every 200 ms */
	TP_ENDLESS,     /* a status line that never ends: "+", then an 'O' every 50 ms */
	TP_SILENT_MAP,  /* CLUSTER SLOTS: every slot on one of 100 nodes that never answer */
	TP_DEAD,        /* nothing answered, CLUSTER SLOTS included, while the connection lasts */
	TP_TWICE,       /* the reply twice, in one write: the second asked for by nobody */
};

struct tp_proxy;

/* A proxy in front of the node at 127.0.0.1:@p node_port; its port in *port.  0 or -1. */
int tp_start(unsigned node_port, struct tp_proxy **out, unsigned *port);
/* The mode of the replies from now on. */
void tp_mode(struct tp_proxy *tp, enum tp_mode mode);
/* How many commands (CLUSTER SLOTS included) the proxy was sent. */
unsigned long tp_commands(struct tp_proxy *tp);
/* Stop it: every connection closed, every thread joined. */
void tp_stop(struct tp_proxy *tp);

#endif
