# SPDX-License-Identifier: MIT
"""Follows lmcache/logging.py: init_logger(name) gives a logging.Logger."""

import logging


def init_logger(name):
    return logging.getLogger(name)
