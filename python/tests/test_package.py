# SPDX-License-Identifier: MIT
"""The package itself: rill.__version__ is the project's version, and a
Python that lacks a dependency is told what to install."""

import os
import subprocess
import sys

import pytest

import rill
from rill import _version

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(PYTHON_DIR)


def test_version_is_the_project_version_of_cmakelists():
    version = _version.project_version(os.path.join(ROOT, "CMakeLists.txt"))
    assert version and version[0].isdigit()
    assert rill.__version__ == version
    assert "__version__" in rill.__all__


def test_pyproject_gives_the_project_version_too():
    with open(os.path.join(PYTHON_DIR, "pyproject.toml"), encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    assert f'version = "{rill.__version__}"' in lines, \
        "python/pyproject.toml's version differs from CMakeLists.txt's project() version"


@pytest.mark.parametrize("module,debian", [("numpy", "python3-numpy"), ("cffi", "python3-cffi")])
def test_a_missing_dependency_says_what_to_install(module, debian):
    # sys.modules[name] = None makes `import name` fail as a missing module does.
    code = (f"import sys; sys.modules[{module!r}] = None; sys.path.insert(0, {PYTHON_DIR!r})\n"
            "try:\n"
            "    import rill\n"
            "except ModuleNotFoundError as exc:\n"
            "    print(exc.name); print(exc)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    name, message = run.stdout.splitlines()[:2]
    assert name == module
    assert message.startswith(f"rill: the package needs {module}")
    assert f"apt install {debian}" in message
    assert f"-m pip install {module}" in message
