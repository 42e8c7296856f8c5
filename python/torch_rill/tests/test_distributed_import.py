# SPDX-License-Identifier: MIT
"""torch_rill.distributed without mpirun: the backend is registered when the
extension has it, and a build without it says how to get it."""

import importlib
import sys
import types

import pytest
import torch.distributed as dist

import torch_rill


def test_backend_registered_when_built():
    if not hasattr(torch_rill._C, "_dist_create"):
        pytest.skip("this build of torch_rill has no distributed backend (no MPI)")
    import torch_rill.distributed as rd
    assert rd.is_available()
    assert "rill" in dist.Backend.backend_list
    assert dist.Backend.backend_capability["rill"] == ["cpu", "rill"]
    # The creator takes _DistributedBackendOptions: a subgroup's global ranks.
    assert dist.Backend._plugins["RILL"].extended_api


def test_a_build_without_mpi_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(torch_rill, "_C", types.SimpleNamespace())
    monkeypatch.delitem(sys.modules, "torch_rill.distributed", raising=False)
    with pytest.raises(ImportError, match="librill_mpi built with MPI.*apt-get install"):
        importlib.import_module("torch_rill.distributed")
