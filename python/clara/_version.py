# SPDX-License-Identifier: MIT
"""The package's version: the one place it is written.

pyproject.toml reads it (tool.setuptools.dynamic), clara.__version__ and
clara.CLARA_VERSION* are derived from it, and it is the version of the C
library (include/clara.h) this package was written for.
"""

__version__ = "0.2.0"
