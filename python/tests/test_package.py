# SPDX-License-Identifier: MIT
"""The package itself: rill.__version__ is the project's version (pip's
metadata too), the two pyproject.toml build the same wheel, and a Python
that lacks a dependency is told what to install."""

import json
import os
import re
import shutil
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


def _pyproject(directory):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    with open(os.path.join(directory, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


@pytest.mark.parametrize("directory", [ROOT, PYTHON_DIR], ids=["root", "python"])
def test_pyproject_gives_the_project_version_too(directory):
    # pip's metadata takes the version from the project() call of
    # CMakeLists.txt, with the pattern each pyproject.toml names.
    project = _pyproject(directory)
    assert project["project"]["dynamic"] == ["version"]
    assert "version" not in project["project"]
    found, = project["tool"]["dynamic-metadata"]
    assert found["field"] == "version"
    with open(os.path.join(directory, found["input"]), encoding="utf-8") as f:
        match = re.search(found["regex"], f.read())
    assert match and match.group("value") == rill.__version__
    source = os.path.join(directory, project["tool"]["scikit-build"]["cmake"]["source-dir"])
    assert os.path.samefile(source, ROOT)


def test_python_pyproject_is_the_root_one_with_its_paths_one_level_up():
    # `pip install .` and `pip install ./python` build the same wheel.
    root, python = _pyproject(ROOT), _pyproject(PYTHON_DIR)
    python["tool"].pop("pytest")
    skbuild = python["tool"]["scikit-build"]
    skbuild["cmake"]["source-dir"] = os.path.normpath(
        os.path.join("python", skbuild["cmake"]["source-dir"]))
    version, = python["tool"]["dynamic-metadata"]
    version["input"] = os.path.normpath(os.path.join("python", version["input"]))
    assert root["tool"]["scikit-build"]["cmake"]["source-dir"] == "."
    assert python == root


@pytest.mark.parametrize("module,debian", [("numpy", "python3-numpy"), ("cffi", "python3-cffi")])
def test_a_missing_dependency_says_what_to_install(module, debian):
    # sys.modules[name] = None makes `import name` fail as a missing module does.
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(rill.__file__)))
    code = (f"import sys; sys.modules[{module!r}] = None; sys.path.insert(0, {package_dir!r})\n"
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


def test_tensor_is_whole_once_its_own_module_is_imported():
    # rill.Tensor is defined in rill._tensor with every method in place, none
    # added by another module at import: a Python that imports rill._tensor
    # alone (a bare package module stands in for rill's __init__, which
    # then never runs, nor rill.ops or rill.compat) has the same class,
    # attribute by attribute, and its operators, views and reductions.
    rill_dir = os.path.dirname(os.path.abspath(rill.__file__))
    code = ("import importlib, json, sys, types\n"
            f"package = types.ModuleType('rill'); package.__path__ = [{rill_dir!r}]\n"
            "sys.modules['rill'] = package\n"
            "T = importlib.import_module('rill._tensor')\n"
            "t = T.Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], T.float32)\n"
            "u = (-(t + t) * 2.0 - 1).reshape(3, 2)\n"
            "print(json.dumps({'names': sorted(dir(T.Tensor)), 'sum': u.sum().item(),\n"
            "                  'row': t[1].numpy().tolist(), 'softmax': t.T.softmax(0).shape,\n"
            "                  'max': t.max(1).indices.numpy().tolist(),\n"
            "                  'modules': [m for m in sys.modules if m.startswith('rill')]}))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["names"] == sorted(dir(rill.Tensor))
    assert got["sum"] == -(4 * 21 + 6) and got["row"] == [4.0, 5.0, 6.0]
    assert got["softmax"] == [3, 2] and got["max"] == [2, 2]
    assert not any(m in got["modules"] for m in ("rill.ops", "rill.compat", "rill._internal"))


def test_the_tests_take_an_installed_package_when_asked_or_without_a_build(tmp_path):
    # A tree of the tests' conftest beside a copy of the package (the
    # source's), and another copy installed elsewhere (with _install.py
    # naming this library): RILL_TEST_INSTALLED=1, or no build and no
    # RILL_LIBRARY, makes the tests import the installed one, even from
    # python/ where `python -m pytest` puts the source first on sys.path.
    package = os.path.dirname(os.path.abspath(rill.__file__))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_install.py", "_rill_*",
                                    "librill*")
    tests = tmp_path / "tree" / "python" / "tests"
    shutil.copytree(package, tmp_path / "tree" / "python" / "rill", ignore=ignore)
    tests.mkdir()
    shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "conftest.py"), tests)
    (tests / "test_which.py").write_text(
        "import os, rill\n"
        "def test_which():\n"
        "    assert os.path.dirname(rill.__file__) == os.environ['EXPECT_RILL'], rill.__file__\n")
    site = tmp_path / "site"
    shutil.copytree(package, site / "rill", ignore=ignore)
    (site / "rill" / "_install.py").write_text(
        f"LIBRARY = {os.path.realpath(rill.library_path)!r}\nVERSION = {rill.__version__!r}\n")

    def run(expect, **env):
        full = dict(os.environ, PYTHONPATH=str(site), EXPECT_RILL=str(expect), **env)
        for name in ("RILL_TEST_INSTALLED", "RILL_LIBRARY"):
            if env.get(name) is None:
                full.pop(name, None)
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                               "tests/test_which.py"], cwd=tests.parent, env=full,
                              capture_output=True, text=True, timeout=120)

    installed, source = site / "rill", tests.parent / "rill"
    for expect, env in ((installed, {"RILL_TEST_INSTALLED": "1"}),
                        (installed, {"RILL_TEST_INSTALLED": None, "RILL_LIBRARY": None}),
                        (source, {"RILL_TEST_INSTALLED": "0"})):
        env.setdefault("RILL_LIBRARY", rill.library_path)
        done = run(expect, **env)
        assert done.returncode == 0, (env, done.stdout, done.stderr)
        assert f"rill: the {'installed' if expect == installed else 'source tree'}" in done.stdout
    done = run(installed, RILL_TEST_INSTALLED="maybe")
    assert done.returncode != 0 and "RILL_TEST_INSTALLED is 'maybe'" in done.stderr + done.stdout
