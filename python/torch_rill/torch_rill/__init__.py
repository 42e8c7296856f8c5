# SPDX-License-Identifier: MIT
"""rill as a PyTorch device: ``torch.device("rill")``, ``tensor.to("rill")``,
``torch.rill``. Importing it (or ``import torch`` alone, through PyTorch's
backend autoload) loads rill's runtime through rill's Python package, so that
both packages share one runtime, then registers the device with PyTorch."""

import atexit
import importlib.machinery
import importlib.util
import os

import torch

try:
    import rill as _rill  # loads librill.so with RTLD_GLOBAL: _C's rill_* calls resolve to it
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "torch_rill needs rill's Python package: install it (pip install . at the root of "
        "rill's repository) or put a build tree's python/ on PYTHONPATH") from exc

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_extension():
    """torch_rill._C: the file $TORCH_RILL_EXTENSION names, else the one
    installed beside this file, else the one CMake built into
    build/<preset>/python/torch_rill/ of the source tree this package sits in."""
    name = "_C" + importlib.machinery.EXTENSION_SUFFIXES[0]
    env = os.environ.get("TORCH_RILL_EXTENSION")
    candidates = [env] if env else [os.path.join(_HERE, name)]
    root = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
    for preset in ("release", "default"):
        if env:
            break
        candidates.append(os.path.join(root, "build", preset, "python", "torch_rill", name))
    found = [path for path in candidates if os.path.exists(path)]
    if not found:
        raise ImportError("torch_rill: its extension module _C is not built; build it with "
                          "pip install --no-build-isolation ./python/torch_rill, or configure "
                          "rill's CMake build with -DRILL_TORCH_PYTHON=<python with torch>")
    spec = importlib.util.spec_from_file_location("torch_rill._C", found[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_C = _load_extension()

torch.utils.rename_privateuse1_backend("rill")

from . import device_module as _device_module  # noqa: E402

torch._register_device_module("rill", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


def _autograd_threads():
    """The indices of the autograd engine's device threads that have started
    (named pt_autograd_<index>), from /proc; None where it cannot tell."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    found = set()
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="ascii") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith("pt_autograd_") and name[len("pt_autograd_"):].isdigit():
            found.add(int(name[len("pt_autograd_"):]))
    return found


def _settle_autograd_threads():
    """PyTorch's autograd engine runs a device's backward nodes on a thread of
    its own, which lets go of a finished backward a moment after the caller
    resumes. When the program ends in that moment, the thread lets go while the
    interpreter finalizes, and a Python object that the backward holds (the
    context torch.autograd.backward keeps in the thread-local state, a
    tensor's) then aborts the process ("terminate called without an active
    exception"). So at exit, while the interpreter is whole, one more backward
    through each started thread of a rill device (_C._settle_autograd_thread),
    which holds no Python object itself."""
    started = _autograd_threads()
    for index in range(_device_module.device_count()):
        if started is not None and index not in started:
            continue
        try:
            _C._settle_autograd_thread(index)
        except RuntimeError:  # a failed device: its error was the program's to see
            pass


atexit.register(_settle_autograd_threads)

from . import multiprocessing as _multiprocessing  # noqa: E402

_multiprocessing._register()

if hasattr(_C, "_dist_create") and torch.distributed.is_available():
    from . import distributed  # noqa: E402,F401  registers torch.distributed's backend "rill"


def _autoload():
    """PyTorch's backend autoload entry point: importing the package did it all."""
