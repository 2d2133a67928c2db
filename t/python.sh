#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/python.sh -- the Python package marukv: runs t/test_python.py (or the
# file of t/ that $MARUKV_PYTESTS names: t/lmcache.sh runs
# test_lmcache.py this way) with pytest on the module just built, for the
# interpreter configure chose
# (PYTHON in the Makefile; /usr/bin/python3 by default, where Debian's
# python3-numpy, python3-torch, python3-pytest and python3-lmdb load).
#
# Run by `make check` from the top of the build tree, with $srcdir set by
# automake's harness.  The package is assembled in a temporary directory
# (the sources from $srcdir/python/marukv, the extension from python/.libs)
# and found through PYTHONPATH; libmarukv through LD_LIBRARY_PATH; the
# README (whose Python example is tested) through MARUKV_TOP_SRCDIR.
# Exit: 0 passed, 1 failed, 77 skipped (configured --disable-python, no
# pytest, or a sanitizer build: see below).

set -u
top_srcdir=${srcdir:-.}
PYTHON=$(sed -n 's/^PYTHON = //p' Makefile)
SAN_CFLAGS=$(sed -n 's/^SAN_CFLAGS = //p' Makefile)
so=python/.libs/_marukv.so

if [ ! -f "$so" ]; then
	echo "skip - the Python module is not built (configure --enable-python; Debian: python3-dev)"
	exit 77
fi
# A sanitized extension needs the sanitizer's runtime loaded first, into an
# interpreter that was not built for it: under ASan, CPython's and numpy's
# own allocations then count as leaks and torch's loader trips the runtime's
# checks, so the results would say nothing about marukv.  The C suites run
# the same library calls under the sanitizers; this one runs plainly.
if [ -n "$SAN_CFLAGS" ]; then
	echo "skip - sanitizer build ($SAN_CFLAGS): the Python suite runs in plain builds only"
	exit 77
fi
if ! "$PYTHON" -c 'import pytest' 2>/dev/null; then
	echo "skip - pytest not found for $PYTHON (Debian: python3-pytest)"
	exit 77
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/marukv-py.XXXXXX") || exit 99
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/marukv" || exit 99
for f in "$top_srcdir"/python/marukv/*.py; do
	cp "$f" "$stage/marukv/" || exit 99
done
cp "$so" "$stage/marukv/" || exit 99

MARUKV_TOP_SRCDIR=$top_srcdir PYTHONPATH=$stage LD_LIBRARY_PATH=$(pwd)/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
	PYTHONDONTWRITEBYTECODE=1 "$PYTHON" -m pytest -q -p no:cacheprovider \
	"$top_srcdir/t/${MARUKV_PYTESTS:-test_python.py}"
rc=$?
[ "$rc" -eq 0 ] || exit 1
