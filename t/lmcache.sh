#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/lmcache.sh -- marukv.lmcache, the LMCache connector: runs
# t/test_lmcache.py, which drives the connector as LMCache's native-plugin
# adapter does (t/lmcache_harness.py), through t/python.sh, which stages
# the package, picks the interpreter and skips where t/python.sh does.
# Run by `make check`; exit as t/python.sh.

MARUKV_PYTESTS=test_lmcache.py exec sh "${srcdir:-.}/t/python.sh"
