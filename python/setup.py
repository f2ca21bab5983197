# SPDX-License-Identifier: MIT
"""What pyproject.toml cannot say: the wheel carries libclara.so.

build_py puts the library into the package as clara/libclara.so.0. It takes
the file CLARA_WHEEL_LIBRARY names (`make wheel` passes the library it just
built); without it, it builds the library from the checkout this directory
sits in (`make lib` in the parent directory: Go and a C compiler needed).

bdist_wheel tags the wheel py3-none-<platform>: the Python code is
version-independent (ctypes, no extension module), the library is not.
The platform is CLARA_WHEEL_PLATFORM when set (`make wheel` sets
manylinux_2_34_x86_64 once tests/check-glibc.sh has found that the library
needs nothing newer than glibc 2.34), else this machine's (linux_x86_64),
which installers elsewhere refuse.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:  # setuptools >= 70.1 has its own
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = "libclara.so.0"


def library_from_checkout():
    root = os.path.dirname(HERE)
    if not (os.path.exists(os.path.join(root, "go.mod")) and os.path.isdir(os.path.join(root, "capi"))):
        raise SystemExit("clara: no libclara.so to bundle: set CLARA_WHEEL_LIBRARY to a built libclara.so, "
                         "or build from a Clara checkout (this directory's parent holds no go.mod and capi/)")
    # A fresh make: not the jobserver of a make that may have started pip.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    subprocess.run(["make", "-C", root, "--no-print-directory", "lib"], check=True, env=env)
    return os.path.join(root, "lib", "libclara.so")


class BuildPy(build_py):
    def run(self):
        # Files left by an earlier build of another version must not ride along.
        shutil.rmtree(os.path.join(self.build_lib, "clara"), ignore_errors=True)
        super().run()
        source = os.environ.get("CLARA_WHEEL_LIBRARY") or library_from_checkout()
        if not os.path.isfile(source):
            raise SystemExit("clara: CLARA_WHEEL_LIBRARY=%s: no such file" % source)
        target = os.path.join(self.build_lib, "clara", BUNDLED)
        shutil.copyfile(source, target)   # follows the symlinks of lib/
        os.chmod(target, 0o755)


class BinaryDistribution(Distribution):
    """Not pure Python: the package goes to platlib, the wheel's root."""

    def has_ext_modules(self):
        return True


class BdistWheel(bdist_wheel):
    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", os.environ.get("CLARA_WHEEL_PLATFORM") or platform


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel})
