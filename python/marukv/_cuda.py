# SPDX-License-Identifier: MIT
"""marukv._cuda: a pool's data arena registered with CUDA, for the vLLM
connector and the LMCache backend.

Registered host memory is what a GPU copies to and from by DMA; an
unregistered range is staged through a buffer of the driver's.  Drivers
refuse very large single registrations, so the arena is registered in
pieces; a copy is best kept inside one piece (split() cuts a range where
pieces meet).  A read-only mapping (a read-only pool handle) needs
cudaHostRegisterReadOnly where the GPU has no HMM."""

import torch

#: cudaHostRegisterReadOnly, from CUDA's cuda_runtime_api.h
READ_ONLY = 0x08
#: the default size of a piece
PIECE = 1 << 30


def check_piece(piece, who):
    """piece as an int, or ValueError naming who asked."""
    piece = int(piece)
    if piece <= 0 or piece % 4096:
        raise ValueError("%s: cuda_register_piece must be a positive multiple of 4096, not %r"
                         % (who, piece))
    return piece


def split(addr, n, pieces):
    """[addr, addr + n) as (offset, length) runs that each lie in one piece
    of a registration (pieces: (base, length, piece size), or None)."""
    if pieces is None:
        return [(0, n)]
    base, _, size = pieces
    runs, at = [], 0
    while at < n:
        end = min(n, at + size - (addr + at - base) % size)
        runs.append((at, end - at))
        at = end
    return runs


class Registration:
    """[addr, addr + length) registered with CUDA in pieces of piece bytes,
    until close().  RuntimeError (nothing left registered) if the driver
    refuses a piece."""

    def __init__(self, addr, length, piece, readonly, who):
        cudart = torch.cuda.cudart()
        flags = READ_ONLY if readonly else 0
        self.pieces = (addr, length, piece)
        self._addrs = []
        for at in range(addr, addr + length, piece):
            n = min(piece, addr + length - at)
            err = cudart.cudaHostRegister(at, n, flags)
            if int(err) != 0:
                self.close()
                raise RuntimeError("%s: cudaHostRegister of %d bytes of the pool's data "
                                   "arena failed (CUDA error %d); a smaller "
                                   "cuda_register_piece may do" % (who, n, int(err)))
            self._addrs.append(at)

    def close(self):
        """Unregister every piece; idempotent."""
        for at in self._addrs:
            torch.cuda.cudart().cudaHostUnregister(at)
        self._addrs = []
