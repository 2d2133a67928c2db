#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/lmcache_backend.sh -- marukv.lmcache_backend, LMCache's allocator
# backend over a pool: runs t/test_lmcache_backend.py, which drives it as
# LMCache's engine and storage manager do (t/lmcache_backend_harness.py,
# over the stand-in for LMCache's names in t/lmcache_standin), through
# t/python.sh, which stages the package, picks the interpreter and skips
# where t/python.sh does.
# Run by `make check`; exit as t/python.sh.

MARUKV_PYTESTS=test_lmcache_backend.py exec sh "${srcdir:-.}/t/python.sh"
