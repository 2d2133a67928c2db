#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/vllm.sh -- marukv.vllm, the vLLM KV connector: runs t/test_vllm.py,
# which drives the connector as vLLM's scheduler and model runner do
# (t/vllm_harness.py, over the stand-in for vLLM's names in
# t/vllm_standin), through t/python.sh, which stages the package, picks
# the interpreter and skips where t/python.sh does.
# Run by `make check`; exit as t/python.sh.

MARUKV_PYTESTS=test_vllm.py exec sh "${srcdir:-.}/t/python.sh"
