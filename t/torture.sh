#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/torture.sh -- the torture trials of t/crash.sh (SIGSTOPs and SIGKILLs
# of clients and lease holders on several nodes, views held across them,
# deletes and evictions); its settings are TORTURE_TRIALS, TORTURE_FIRST,
# TORTURE_SEED, TORTURE_BUDGET and TORTURE_VERBOSE (see t/crash.sh).
# Run by `make check` from the top of the build tree.
exec sh "$(dirname "$0")/crash.sh" --torture
