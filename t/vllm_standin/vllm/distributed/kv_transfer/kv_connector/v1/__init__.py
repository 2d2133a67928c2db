# SPDX-License-Identifier: MIT
"""Part of the stand-in for vLLM (see vllm/__init__.py)."""
