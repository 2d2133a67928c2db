/* SPDX-License-Identifier: MIT */
/*
 * error.c -- error codes, their names, and the per-thread message.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <libpmem2.h>

#include "internal.h"

static __thread char errmsg[512];

MKV_EXPORT const char *
mkv_errormsg(void)
{
	return errmsg;
}

void
mkv_err_clear(void)
{
	errmsg[0] = '\0';
}

int
mkv_err(int code, const char *fmt, ...)
{
	char msg[sizeof(errmsg)];
	va_list ap;

	/* formatted aside first: an argument may be the message itself (mkv_errormsg()) */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(errmsg, msg, sizeof(errmsg));
	return code;
}

int
mkv_err_pmem2(int rc, const char *what)
{
	int code = rc;

	if (rc == PMEM2_E_LENGTH_OUT_OF_RANGE || rc == PMEM2_E_OFFSET_OUT_OF_RANGE)
		code = MKV_E_CORRUPT;
	else if (rc < -4095 || rc >= 0)
		code = MKV_E_INTERNAL;
	return mkv_err(code, "%s: %s", what, pmem2_errormsg());
}

MKV_EXPORT const char *
mkv_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
	case MKV_E_NOTFOUND:
		return "no such key";
	case MKV_E_RDONLY:
		return "pool is open read-only";
	case MKV_E_NOTPOOL:
		return "not a marukv pool";
	case MKV_E_CORRUPT:
		return "pool is damaged or truncated";
	case MKV_E_VERSION:
		return "unknown pool format version";
	case MKV_E_INTERNAL:
		return "internal error in a dependency";
	case MKV_E_NOSPC:
		return "pool is full";
	case MKV_E_EXISTS:
		return "key exists (values are write-once)";
	case MKV_E_NOENT:
		return "no pool at that path";
	case MKV_E_USERS:
		return "every client slot or node table entry of the pool is taken";
	case MKV_E_INVAL:
		return "invalid argument";
	case MKV_E_EXPIRED:
		return "this handle's client was judged dead: its views may have changed";
	case MKV_E_TIMEDOUT:
		return "no lease holder answered in time";
	case MKV_E_PERM:
		return "pool directory or file is unsafe to use";
	case MKV_E_RANGE:
		return "the frame does not fit the buffer or an MRDN v1 frame";
	case MKV_E_FRAME_MAGIC:
		return "not an MRDN frame";
	case MKV_E_FRAME_VERSION:
		return "MRDN frame of another version, or with unknown header bits";
	case MKV_E_FRAME_SHORT:
		return "MRDN frame truncated";
	case MKV_E_FRAME_CHECKSUM:
		return "MRDN frame's body does not match its checksum";
	case MKV_E_FRAME_BODY:
		return "MRDN frame's body is not a marukv value";
	case MKV_E_REMOTE:
		return "the remote tier failed or did not answer";
	default:
		break;
	}
	if (code < 0 && code > -4096)
		return strerror(-code);
	return "unknown error code";
}

MKV_EXPORT const char *
mkv_version(void)
{
	return PACKAGE_VERSION;
}
