/* SPDX-License-Identifier: MIT */
/*
 * valid.c -- what a valid key, node name and pair of watermarks are: the
 * checks the public calls make of their arguments, and that the holder
 * makes again of what reaches it from other processes.
 */
#include "config.h"

#include <string.h>

#include "internal.h"

int
mkv_valid_key(const void *key, size_t klen)
{
	if (!key)
		return mkv_err(MKV_E_INVAL, "key is NULL");
	if (klen == 0 || klen > MKV_KEY_MAX)
		return mkv_err(MKV_E_INVAL, "key length %zu out of range (1 to %d)", klen,
				MKV_KEY_MAX);
	return 0;
}

/* A node's name: 1 to MKV_NODE_NAME_MAX characters of [A-Za-z0-9._-]. */
int
mkv_valid_node_name(const char *name)
{
	size_t n = strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");

	if (n == 0 || n > MKV_NODE_NAME_MAX || name[n] != '\0')
		return mkv_err(MKV_E_INVAL,
				"node name \"%.40s\" is not 1 to %d characters of [A-Za-z0-9._-]",
				name, MKV_NODE_NAME_MAX);
	return 0;
}

/* Watermarks as the options and the holder take them. */
int
mkv_valid_watermarks(unsigned low, unsigned high)
{
	if (low > high || high > 90)
		return mkv_err(MKV_E_INVAL, "watermarks %u%%/%u%%: want 0 <= low <= high <= 90",
				low, high);
	return 0;
}

/* Check every key of an array before any lookup. */
int
mkv_valid_keys(const struct mkv_key *keys, size_t n, const char *fn)
{
	int rc;

	if (!keys && n)
		return mkv_err(MKV_E_INVAL, "%s: keys is NULL", fn);
	for (size_t i = 0; i < n; i++)
		if ((rc = mkv_valid_key(keys[i].data, keys[i].len)))
			return mkv_err(rc, "%s: key %zu: %s", fn, i, mkv_errormsg());
	return 0;
}
