# SPDX-License-Identifier: MIT
"""rill.__version__: the version of the rill project, as CMakeLists.txt's
project() gives it. The package keeps no copy of its own: an installed
package reads the one that `cmake --install` (run by pip too, through
scikit-build-core) wrote into _install.py, a package used from the source
tree reads CMakeLists.txt two directories up, and any other asks the
package metadata, which pyproject.toml takes from CMakeLists.txt too."""

import os
import re

_HERE = os.path.dirname(os.path.abspath(__file__))
_PROJECT = re.compile(r"project\(\s*rill\s+VERSION\s+([0-9][0-9A-Za-z.+-]*)")


def project_version(cmakelists):
    """The version that the project() call of the file cmakelists names, or None."""
    try:
        with open(cmakelists, encoding="utf-8") as f:
            match = _PROJECT.search(f.read())
    except OSError:
        return None
    return match.group(1) if match else None


def _version():
    try:
        from . import _install  # written by cmake --install
        return _install.VERSION
    except (ImportError, AttributeError):
        pass
    found = project_version(os.path.join(os.path.dirname(os.path.dirname(_HERE)),
                                         "CMakeLists.txt"))
    if found:
        return found
    try:
        from importlib import metadata
        return metadata.version("rill")
    except Exception:  # no metadata either: say so rather than fail the import
        return "0+unknown"


__version__ = _version()
