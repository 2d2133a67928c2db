/* SPDX-License-Identifier: MIT */
/*
 * rcluster.h -- a Redis Cluster client on hiredis: slots, redirects.
 *
 * hiredis (0.14) speaks to one server; this finds the server of each key.
 * The client learns which node serves each of the 16384 slots from
 * CLUSTER SLOTS, keeps one connection per node, made when first needed,
 * and follows the cluster's -MOVED and -ASK redirects while slots move.
 *
 * Every failure to reach the cluster is MKV_E_REMOTE, with a message
 * (mkv_errormsg(), mkv_rc_lasterror()) naming the node and what happened.
 * A handle is used by one thread at a time (distinct handles are
 * independent), and only by the process that opened it: a child of fork()
 * opens its own.
 */
#ifndef MKV_RCLUSTER_H
#define MKV_RCLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct mkv_rc;

/*
 * A client of the cluster behind @p servers, "host:port[,host:port...]":
 * 1 to 16 seed nodes, each host up to 255 bytes, each port 1 to 65535.
 * @p timeout_ms (more than 0) bounds each command: it ends, whatever
 * the cluster does, within the timeout after it began (its connects,
 * sends, replies, redirects, retries and map refreshes; a refresh asks
 * three nodes at most); a name's lookup (getaddrinfo) is not bounded by
 * it.
 * Nothing is connected yet: the first command connects and fetches the
 * slot map.  0, MKV_E_INVAL (a bad list; the message says which part),
 * MKV_E_NOMEM; *out is NULL on failure.
 */
int mkv_rc_open(const char *servers, uint32_t timeout_ms, struct mkv_rc **out);
/* Close the connections and free the handle; NULL is fine. */
void mkv_rc_close(struct mkv_rc *c);
/*
 * Watch descriptor @p fd (-1: none): while it is readable every command
 * of the handle fails at once with MKV_E_REMOTE, a command waiting inside
 * included ("cancelled").  For another thread to stop the handle's user,
 * with an eventfd or a pipe it writes to.
 */
void mkv_rc_watch(struct mkv_rc *c, int fd);

/*
 * The cluster slot of a key: CRC16 (XMODEM: polynomial 0x1021, initial 0)
 * of the key, or of its hash tag (the bytes between the first '{' and the
 * first '}' after it, when there are any), mod 16384.
 */
unsigned mkv_rc_slot(const void *key, size_t len);

/*
 * SET key value, with EX @p ttl_s when it is more than 0.  The value is
 * the @p iovcnt pieces of @p iov, sent from where they are.  0,
 * MKV_E_REMOTE, MKV_E_INVAL (a NULL handle, key or iov with a length).
 */
int mkv_rc_set(struct mkv_rc *c, const void *key, size_t klen, const struct iovec *iov,
		int iovcnt, uint32_t ttl_s);
/*
 * GET key: 0 with the value in *val (malloc'd, the caller frees it; not
 * NULL even when empty) and its length in *len; MKV_E_NOTFOUND if the key
 * has no value; MKV_E_REMOTE for anything else the cluster does (no
 * connection, no reply in time, an error reply, a reply of another type,
 * a value longer than @p max bytes: refused before it is read);
 * MKV_E_NOMEM; MKV_E_INVAL.
 */
int mkv_rc_get(struct mkv_rc *c, const void *key, size_t klen, size_t max, void **val,
		size_t *len);
/* DEL key: 0 (deleted, or there was none), MKV_E_REMOTE, MKV_E_INVAL. */
int mkv_rc_del(struct mkv_rc *c, const void *key, size_t klen);

/* The handle's latest MKV_E_REMOTE, described for messages (kept until the next one); "" if none. */
const char *mkv_rc_lasterror(const struct mkv_rc *c);
/* How many -ASK (@p ask) or -MOVED redirects the handle has followed (for the tests). */
unsigned long mkv_rc_redirects(const struct mkv_rc *c, int ask);

#endif
