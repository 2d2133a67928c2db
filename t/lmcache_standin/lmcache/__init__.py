# SPDX-License-Identifier: MIT
"""A stand-in for the few names of LMCache (github.com/LMCache/LMCache) that
marukv.lmcache_backend imports, at LMCache's module paths, for
t/test_lmcache_backend.py.  Each module says which LMCache file it follows."""
