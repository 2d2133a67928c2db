/* SPDX-License-Identifier: MIT */
/*
 * opts.c -- the options of a pool's creation and open: defaults, and each
 * setter's check of its value.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

void
mkv_opts_defaults(struct mkv_opts *o)
{
	*o = (struct mkv_opts){
		.data_size = MKV_DEFAULT_DATA_SIZE,
		.page_size = MKV_DEFAULT_PAGE_SIZE,
		.max_clients = MKV_DEFAULT_MAX_CLIENTS,
		.lease_period_ms = MKV_DEFAULT_LEASE_PERIOD_MS,
		.client_timeout_ms = MKV_DEFAULT_CLIENT_TIMEOUT_MS,
		.wm_low = MKV_DEFAULT_LOW_WATERMARK,
		.wm_high = MKV_DEFAULT_HIGH_WATERMARK,
		.max_nodes = MKV_DEFAULT_MAX_NODES,
		.coherence = MKV_COHERENT,
	};
}

MKV_EXPORT int
mkv_opts_new(struct mkv_opts **out)
{
	mkv_err_clear();
	if (!out)
		return mkv_err(MKV_E_INVAL, "mkv_opts_new: out is NULL");
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return mkv_err(MKV_E_NOMEM, "mkv_opts_new: out of memory");
	mkv_opts_defaults(*out);
	return 0;
}

MKV_EXPORT int
mkv_opts_set_watermarks(struct mkv_opts *opts, unsigned low_pct, unsigned high_pct)
{
	int rc;

	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_watermarks: opts is NULL");
	if ((rc = mkv_valid_watermarks(low_pct, high_pct)))
		return rc;
	opts->wm_low = low_pct;
	opts->wm_high = high_pct;
	return 0;
}

MKV_EXPORT void
mkv_opts_delete(struct mkv_opts **opts)
{
	if (!opts)
		return;
	free(*opts);
	*opts = NULL;
}

MKV_EXPORT int
mkv_opts_set_data_size(struct mkv_opts *opts, uint64_t bytes)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_data_size: opts is NULL");
	if (bytes == 0 || bytes > MKV_DATA_SIZE_MAX)
		return mkv_err(MKV_E_INVAL, "data size %llu out of range (1 to 2^46)",
				(unsigned long long)bytes);
	opts->data_size = bytes;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_page_size(struct mkv_opts *opts, uint32_t bytes)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_page_size: opts is NULL");
	if (bytes < 4096 || bytes > (1U << 30) || (bytes & (bytes - 1)))
		return mkv_err(MKV_E_INVAL, "page size %u is not a power of two from 4 KiB to 1 GiB",
				bytes);
	opts->page_size = bytes;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_max_clients(struct mkv_opts *opts, uint32_t n)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_max_clients: opts is NULL");
	if (n == 0 || n > MKV_MAX_CLIENTS_LIMIT)
		return mkv_err(MKV_E_INVAL, "max clients %u out of range (1 to %u)", n,
				MKV_MAX_CLIENTS_LIMIT);
	opts->max_clients = n;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_registry_size(struct mkv_opts *opts, uint64_t bytes)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_registry_size: opts is NULL");
	if (bytes != 0 && (bytes < MKV_REGISTRY_MIN || bytes > MKV_REGISTRY_MAX))
		return mkv_err(MKV_E_INVAL, "registry size %llu out of range (1 MiB to 1 TiB, or 0)",
				(unsigned long long)bytes);
	opts->registry_size = bytes;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_lease_period(struct mkv_opts *opts, uint32_t ms)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_lease_period: opts is NULL");
	if (ms < 50 || ms > 60000)
		return mkv_err(MKV_E_INVAL, "lease period %u ms out of range (50 to 60000)", ms);
	opts->lease_period_ms = ms;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_client_timeout(struct mkv_opts *opts, uint32_t ms)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_client_timeout: opts is NULL");
	if (ms < 100 || ms > 3600000)
		return mkv_err(MKV_E_INVAL, "client timeout %u ms out of range (100 to 3600000)", ms);
	opts->client_timeout_ms = ms;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_max_nodes(struct mkv_opts *opts, uint32_t n)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_max_nodes: opts is NULL");
	if (n == 0 || n > MKV_MAX_NODES_LIMIT)
		return mkv_err(MKV_E_INVAL, "max nodes %u out of range (1 to %u)", n,
				MKV_MAX_NODES_LIMIT);
	opts->max_nodes = n;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_group(struct mkv_opts *opts, gid_t gid)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_group: opts is NULL");
	if (gid == (gid_t)-1)
		return mkv_err(MKV_E_INVAL, "group id -1 is not a group");
	opts->has_group = true;
	opts->gid = gid;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_node(struct mkv_opts *opts, const char *name)
{
	int rc;

	mkv_err_clear();
	if (!opts || !name)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_node: NULL argument");
	if ((rc = mkv_valid_node_name(name)))
		return rc;
	memcpy(opts->node, name, strlen(name) + 1);
	return 0;
}

MKV_EXPORT int
mkv_opts_set_coherence(struct mkv_opts *opts, enum mkv_coherence coherence)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_coherence: opts is NULL");
	if (coherence != MKV_COHERENT && coherence != MKV_NONCOHERENT)
		return mkv_err(MKV_E_INVAL, "coherence %d is neither MKV_COHERENT nor MKV_NONCOHERENT",
				(int)coherence);
	if (coherence == MKV_NONCOHERENT && !mkv_share_supported())
		return mkv_err(MKV_E_INVAL,
				"non-coherent pools need cache line flushes this library was not built with");
	opts->coherence = coherence;
	return 0;
}
