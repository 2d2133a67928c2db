# SPDX-License-Identifier: MIT
"""The extension marukv._marukv, built against the installed libmarukv:
its compiler and linker flags from pkg-config (PKG_CONFIG_PATH as usual).
The rest of the package is declared in pyproject.toml."""

import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "libmarukv"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("marukv: pkg-config cannot find libmarukv (install libmarukv-dev, "
                         "or set PKG_CONFIG_PATH): %s" % e)
    return shlex.split(out)


flags = pkg_config("--cflags")
setup(ext_modules=[Extension(
    "marukv._marukv", ["marukvmodule.c"],
    include_dirs=[f[2:] for f in flags if f.startswith("-I")],
    extra_compile_args=[f for f in flags if not f.startswith("-I")],
    extra_link_args=pkg_config("--libs"))])
