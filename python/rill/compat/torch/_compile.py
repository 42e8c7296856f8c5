# SPDX-License-Identifier: MIT
"""torch.compile on rill: the model captured into a rill graph at its first
call and replayed after (rill.compile), which is what torchair's
reduce-overhead mode and torch's mode="reduce-overhead" do on a device."""

from ... import compile as _rill_compile


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
            options=None, disable=False):  # noqa: A001 - torch's name
    """torch.compile(model, backend=..., mode=...): model (a callable or an
    nn.Module) captured at its first call for a set of input shapes and
    replayed at later calls with the same (rill.compile). rill has one
    compiled form, a graph, whatever the backend: "inductor", a torchair
    backend from get_npu_backend(), or a callable that one of them made.
    mode may be None or "reduce-overhead"; disable=True returns model."""
    if mode not in (None, "default", "reduce-overhead"):
        raise ValueError(f"torch.compile: mode {mode!r} is not supported; rill compiles into "
                         "a graph (mode='reduce-overhead')")
    if not (backend == "inductor" or callable(backend) or hasattr(backend, "compiler_config")):
        raise ValueError(f"torch.compile: backend {backend!r} is not supported; pass "
                         "'inductor' or torchair.get_npu_backend()")
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if disable:
        return model
    return _rill_compile(model)
