# SPDX-License-Identifier: MIT
"""PyTorch's own sample inputs of every op in its OpInfo database
(torch.testing._internal.common_methods_invocations.op_db, the inputs
PyTorch's test_ops.py runs on each device), run on rill and on the CPU:
the same dtypes, shapes and values, or the same error (its type and first
line) raised at the call, with the stream left working. Each sample is made on the CPU and
moved to rill, so both runs see the same numbers. It covers the native
kernels and the fallback alike, in float32, int64, bool and complex64, and
the in-place variants (x.op_()) in float32 and int64."""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

from conftest import first_line, stream_error

DTYPES = (torch.float32, torch.int64, torch.bool, torch.complex64)
SAMPLES = 4  # the first samples of each op and dtype: PyTorch's simplest cases come first

# Their values are random or uninitialized: only dtypes and shapes compare.
UNDEFINED_VALUES = ("rand", "bernoulli", "dropout", "normal", "multinomial", "uniform", "lowrank",
                    "rrelu", "empty", "poisson", "exponential", "geometric", "cauchy")

# In place, these differ from the CPU in ways the tests of other files
# describe, or PyTorch's own result is undefined.
IN_PLACE_SKIPPED = {
    "addbmm": "a self that broadcasts is resized, and the CPU reads its new, uninitialized memory",
    "addr": "the CPU refuses a self that broadcasts by the identity of the C++ reference passed",
    "masked_scatter": "a mask the CPU kernel refuses fails the stream later (its meta kernel takes it)",
    "logit": "an integer self fails the stream later (its meta kernel takes it)",
}

SKIPPED = {
    "as_strided": "its partial views read storage beyond the view, which .to() does not move",
    "tensor_split": "its sections tensor must stay on the CPU, and the samples are moved whole",
}


def skip_reason(op):
    if op.name.startswith("sparse.") or op.name == "to_sparse":
        return "rill has no sparse tensors"
    return SKIPPED.get(op.name)


def to_rill(x):
    if isinstance(x, torch.Tensor):
        return x.detach().to("rill")
    if isinstance(x, (list, tuple)):
        return type(x)(to_rill(y) for y in x)
    if isinstance(x, dict):
        return {k: to_rill(v) for k, v in x.items()}
    return x


def tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in tensors(y)]
    return []


def check_sample(fn, name, sample, what):
    try:
        want = fn(sample.input, *sample.args, **sample.kwargs)
    except Exception as e:  # the CPU's error, whatever it is
        with pytest.raises(Exception) as got:
            fn(to_rill(sample.input), *to_rill(sample.args), **to_rill(sample.kwargs))
        failed = stream_error()
        assert (type(got.value), first_line(got.value)) == (type(e), first_line(e)), what
        assert failed is None, (what, failed)
        return
    got = fn(to_rill(sample.input), *to_rill(sample.args), **to_rill(sample.kwargs))
    want, got = tensors(want), tensors(got)
    assert len(got) == len(want), what
    values = not any(part in name for part in UNDEFINED_VALUES)
    for w, g in zip(want, got):
        g = g.cpu()
        assert (g.dtype, g.shape) == (w.dtype, w.shape), what
        if values:
            torch.testing.assert_close(g.resolve_conj().resolve_neg(),
                                       w.resolve_conj().resolve_neg(), equal_nan=True, rtol=1e-4,
                                       atol=1e-4, msg=lambda m: f"{what}: {m}")


def in_place(op):
    """op's in-place variant, returning self: of a copy of the sample's
    input, so that the CPU's run leaves the sample as it was."""
    def run(x, *args, **kwargs):
        x = x.clone()
        op.inplace_variant(x, *args, **kwargs)
        return x
    return run


def samples(op, dtypes):
    for dtype in dtypes:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        for k, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=False)):
            if k == SAMPLES:
                break
            yield f"{dtype} sample {k}: {sample.summary()}", sample


@pytest.mark.parametrize("op", op_db, ids=[f"{o.name}.{o.variant_test_name}" for o in op_db])
def test_samples_of_every_op_give_the_cpus_results(op):
    if reason := skip_reason(op):
        pytest.skip(reason)
    ran = 0
    for what, sample in samples(op, DTYPES):
        check_sample(op, op.name, sample, what)
        ran += 1
    assert stream_error() is None
    if ran == 0:
        pytest.skip("no sample in these dtypes")


IN_PLACE_OPS = [o for o in op_db if o.inplace_variant is not None]


@pytest.mark.parametrize("op", IN_PLACE_OPS,
                         ids=[f"{o.name}.{o.variant_test_name}" for o in IN_PLACE_OPS])
def test_in_place_variants_write_the_cpus_results(op):
    """x.op_(...) writes what the CPU writes, or raises what it raises: an
    in-place op that would have to resize x raises."""
    if reason := skip_reason(op) or IN_PLACE_SKIPPED.get(op.name):
        pytest.skip(reason)
    ran = 0
    for what, sample in samples(op, (torch.float32, torch.int64)):
        check_sample(in_place(op), op.name, sample, what)
        ran += 1
    assert stream_error() is None
    if ran == 0:
        pytest.skip("no sample in these dtypes")
