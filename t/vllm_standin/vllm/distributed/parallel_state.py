# SPDX-License-Identifier: MIT
"""Follows vllm/distributed/parallel_state.py: the tensor-parallel rank of
this worker.  The harness sets it (vLLM takes it from its process group)."""

_TP_RANK = 0


def set_tensor_model_parallel_rank(rank):
    """The harness's, not vLLM's: which rank this process plays."""
    global _TP_RANK
    _TP_RANK = rank


def get_tensor_model_parallel_rank():
    return _TP_RANK
