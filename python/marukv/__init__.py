# SPDX-License-Identifier: MIT
"""marukv: zero-copy shared-memory key-value pools for LLM KV-cache blocks.

A pool is a directory on tmpfs (/dev/shm/...) or on CXL memory behind a DAX
filesystem, opened by any number of processes at once.  A writer allocates
a buffer in the pool, fills it in place and publishes it under a key; any
process then gets a zero-copy, read-only view of the value.  Values are
write-once.  Keys are 1 to KEY_MAX (510) bytes: bytes, or any object with
the buffer protocol (bytearray, memoryview, numpy array...); not str.

    import marukv, numpy

    with marukv.Pool("/dev/shm/mypool", create=True,
                     data_size=64 << 20) as pool:
        pool.put(b"k1", b"hello")                  # copying write
        buf = pool.alloc(4096)                      # zero-copy write:
        numpy.frombuffer(buf, numpy.uint8)[:] = 7   #  fill pool pages in place,
        pool.publish(b"k2", buf)                    #  then publish them
        with pool.get(b"k2") as view:               # zero-copy read
            a = numpy.frombuffer(view, numpy.uint8) # no copy: pool memory
            assert a.sum() == 7 * 4096
            del a                                   # before the view ends
        print(pool.exists(b"k1"), pool.prefix_len([b"k1", b"k2", b"k3"]))

Objects:
  Pool(path=None, create=False, readonly=False, verify=False,
       nochecksum=False, **options)   an open pool; see help(marukv.Pool)
  View     a published value, read-only buffer protocol, from Pool.get()
  Buffer   writable pool pages, from Pool.alloc(), for Pool.publish()
  Ticket   a publish in flight, from Pool.publish_async(), for Pool.wait()

Lifetimes.  A View keeps its bytes unchanged, even if the key is deleted
or evicted by another process, until view.release() (or the end of its
with block, or its garbage collection).  Views pin pages: release them
promptly.  release(), Pool.publish(), Pool.abort() and Pool.close() raise
BufferError while a memoryview, numpy array or torch tensor made from the
view or buffer is still alive, as mmap.close() does: drop those first.
Any use of a released View, a consumed Buffer or a closed Pool raises
ValueError; none of them can crash the interpreter.

Chains.  KV-cache blocks of a prompt form a chain: publish them with
Pool.publish_chain(parent, [(key, buf), ...]) (or publish(key, buf,
parent=...)), and Pool.prefix_len(keys) or Pool.get_batch(keys,
prefix=True) finds how many leading blocks are cached.  Eviction takes a
chain's blocks tail first.  Pool.publish_async(key, buf, parent=...)
publishes a block without waiting for its registration, so the next block
is filled meanwhile; Pool.wait(ticket) gives each one's result.

Errors.  Every failure raises a subclass of marukv.Error, which carries
.code (the C library's code, one of the E_* constants) and .message (the
library's message): InvalidArgument (also a ValueError), NoMemory (also a
MemoryError), NoSpace, Exists, NoPool, TooManyClients, IOFailure,
TimedOut, Permission, NotFound (also a KeyError), ReadOnly, NotPool,
Corrupt, VersionMismatch, Internal, Expired, RemoteFailed, and BadFrame
(never raised itself) with one subclass per refused frame: FrameMagic,
FrameVersion, FrameShort, FrameChecksum, FrameBody.  Wrong Python types
raise TypeError, out-of-range integers OverflowError, as usual.

Remote tier.  A pool may spill the values it evicts to a Redis Cluster
and bring one back on request.  Pool.set_remote(servers, prefix=...,
ttl_s=..., queue_mib=..., timeout_ms=..., tier=...) sets it for every
process of the pool (servers "" or None: off), Pool.remote() reads it
back, and Pool.fetch(key) makes sure key is in the pool, fetching and
publishing it from the tier if it is not: NotFound if neither has it,
RemoteFailed if the tier did not answer in time, a BadFrame subclass if
what it returned was refused.  fetch() is the only call that reaches the
network (evicted values spill from a thread of the library); a get()
that misses stays a miss until its caller fetches.  stat() counts the
tier's spills and fetches (remote_*).

Threads and processes.  One Pool may be used by several threads at once;
calls that can wait release the GIL.  Each process opens the pool itself:
a Pool inherited across fork() raises InvalidArgument in the child (and
is harmless there), so with multiprocessing open pools in the workers.

See marukv-python(7) and marukv(3) for the C library underneath.
"""

from marukv._marukv import (  # noqa: F401
    Pool, View, Buffer, Ticket, version, strerror, KEY_MAX,
    E_INVAL, E_NOMEM, E_NOSPC, E_EXISTS, E_NOENT, E_USERS, E_IO, E_TIMEDOUT,
    E_PERM, E_NOTFOUND, E_RDONLY, E_NOTPOOL, E_CORRUPT, E_VERSION,
    E_INTERNAL, E_EXPIRED, E_FRAME_MAGIC, E_FRAME_VERSION, E_FRAME_SHORT,
    E_FRAME_CHECKSUM, E_FRAME_BODY, E_REMOTE,
)
from marukv._errors import (  # noqa: F401
    Error, InvalidArgument, NoMemory, NoSpace, Exists, NoPool, TooManyClients,
    IOFailure, TimedOut, Permission, NotFound, ReadOnly, NotPool, Corrupt,
    VersionMismatch, Internal, Expired, RemoteFailed, BadFrame, FrameMagic,
    FrameVersion, FrameShort, FrameChecksum, FrameBody,
)

__all__ = [
    "Pool", "View", "Buffer", "Ticket", "version", "strerror", "KEY_MAX",
    "E_INVAL", "E_NOMEM", "E_NOSPC", "E_EXISTS", "E_NOENT", "E_USERS", "E_IO",
    "E_TIMEDOUT", "E_PERM", "E_NOTFOUND", "E_RDONLY", "E_NOTPOOL", "E_CORRUPT",
    "E_VERSION", "E_INTERNAL", "E_EXPIRED", "E_FRAME_MAGIC", "E_FRAME_VERSION",
    "E_FRAME_SHORT", "E_FRAME_CHECKSUM", "E_FRAME_BODY", "E_REMOTE",
    "Error", "InvalidArgument", "NoMemory", "NoSpace", "Exists", "NoPool",
    "TooManyClients", "IOFailure", "TimedOut", "Permission", "NotFound",
    "ReadOnly", "NotPool", "Corrupt", "VersionMismatch", "Internal", "Expired",
    "RemoteFailed", "BadFrame", "FrameMagic", "FrameVersion", "FrameShort",
    "FrameChecksum", "FrameBody",
]
