# SPDX-License-Identifier: MIT
"""A stand-in for the few names of vLLM that marukv.vllm imports, at vLLM's
module paths, for t/test_vllm.py (vLLM itself is not in Debian).  Each
module says which file of vLLM it follows, at commit
22720624714d3299d2df87e0c2c67639202c4b8a (vllm-project/vllm, 2026-05-27).
It holds those names and nothing that would do vLLM's work."""
