#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t/mutations.sh -- does the host emulator catch each missing cache
# maintenance?  Runs t/check_hosts once recording every site of an
# invalidation or a flush that the library made (HOSTEMU_SITES, see
# t/hostemu.c), then once per site with that site left out (HOSTEMU_SKIP):
# a site whose omission no test notices is "missed".  Prints one line per
# site and a summary; exits 1 if any site was missed, 0 if every one was
# caught.  Not part of make check (make check-mutations): it says how far
# the emulated-host tests reach, which is still being extended.
set -u
top_builddir=${top_builddir:-.}
suite="$top_builddir/t/check_hosts"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mkvmut.XXXXXX") || exit 99
trap 'rm -rf "$scratch"' EXIT

if ! HOSTEMU_SITES="$scratch/sites" "$suite" >"$scratch/base.log" 2>&1; then
	echo "mutations: t/check_hosts fails with every site in place:" >&2
	tail -5 "$scratch/base.log" >&2
	exit 99
fi
sort -u "$scratch/sites" >"$scratch/all"
caught=0
missed=0
while read -r site; do
	if HOSTEMU_SKIP=$site timeout 600 "$suite" >"$scratch/run.log" 2>&1; then
		echo "missed $site"
		missed=$((missed + 1))
	else
		echo "caught $site"
		caught=$((caught + 1))
	fi
done <"$scratch/all"
echo "mutations: $caught of $((caught + missed)) sites caught, $missed missed"
[ "$missed" -eq 0 ]
