# SPDX-License-Identifier: MIT
"""The exceptions of marukv: one class per error code of the C library.

Every failed call raises a subclass of Error; the C module (_marukv) maps
the library's codes to these classes by name.
"""


class Error(Exception):
    """A marukv call failed.

    code is the library's (negative) error code, one of the E_* constants
    of the marukv module; message is the library's message saying what went
    wrong and where (str(e) gives it).
    """

    def __init__(self, code, message):
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self):
        return self.message


class InvalidArgument(Error, ValueError):
    """A bad argument (a key of 0 or more than KEY_MAX bytes, a size of 0,
    an option out of range, a buffer or view not of this handle), or a
    handle used in a child process after fork()."""


class NoMemory(Error, MemoryError):
    """Out of process memory."""


class NoSpace(Error):
    """The pool (its data arena or its registry) is full, even after
    eviction: what is left is pinned by views or granted to writers."""


class Exists(Error):
    """The key is published already (values are write-once)."""


class NoPool(Error):
    """No pool at that path, and create=False."""


class TooManyClients(Error):
    """Every client slot of the pool is taken (or the node table is full)."""


class IOFailure(Error):
    """An I/O error from the pool's backing files."""


class TimedOut(Error):
    """No lease holder answered in time (30 lease periods, and a client
    timeout in a non-coherent pool).  A publish that timed out may still
    take effect later."""


class Permission(Error):
    """The pool's directory or files are unsafe to use (owned by another
    user, writable by others, a symbolic link); see marukv(7), SECURITY."""


class NotFound(Error, KeyError):
    """No such key.  Also a KeyError."""


class ReadOnly(Error):
    """A write call on a pool opened readonly=True."""


class NotPool(Error):
    """The path holds something that is not a marukv pool."""


class Corrupt(Error):
    """The pool is damaged or truncated (or, with verify=True, a value's
    bytes do not match their checksum)."""


class VersionMismatch(Error):
    """The pool has a format version this library does not know."""


class Internal(Error):
    """An unexpected failure inside a dependency (the message says which)."""


class Expired(Error):
    """This handle's client was judged dead while it was paused: its views
    may have changed.  Close the pool and open it again."""


class RemoteFailed(Error):
    """The remote tier did not answer within its timeout_ms, or answered an
    error (the message names the node); Pool.fetch() published nothing."""


class BadFrame(Error):
    """A frame was refused: one subclass per reason.  Pool.fetch() raises
    them for the frame the remote tier returned, and publishes nothing."""


class FrameMagic(BadFrame):
    """Not an MRDN frame: its first 4 bytes are not "MRDN"."""


class FrameVersion(BadFrame):
    """An MRDN frame of another version, or with header padding that is
    not zero."""


class FrameShort(BadFrame):
    """Fewer bytes than the frame's header says."""


class FrameChecksum(BadFrame):
    """The frame's body does not match its checksum."""


class FrameBody(BadFrame):
    """The frame's body, checksum intact, is not a marukv value (or, from
    Pool.fetch(), is the value of another key)."""


# The classes are marukv's, whatever module defines them.
for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, Error):
        _cls.__module__ = "marukv"
del _cls
