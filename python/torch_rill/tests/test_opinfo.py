# SPDX-License-Identifier: MIT
"""PyTorch's own sample inputs of every op in its OpInfo database
(torch.testing._internal.common_methods_invocations.op_db, the inputs
PyTorch's test_ops.py runs on each device), run on rill and on the CPU:
the same dtypes, shapes and values, or the same kind of error raised at the
call, with the stream left working. Each sample is made on the CPU and
moved to rill, so both runs see the same numbers. It covers the native
kernels and the fallback alike, in float32, int64, bool and complex64."""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

from conftest import first_line, stream_error

DTYPES = (torch.float32, torch.int64, torch.bool, torch.complex64)
SAMPLES = 4  # the first samples of each op and dtype: PyTorch's simplest cases come first

# Their values are random or uninitialized: only dtypes and shapes compare.
UNDEFINED_VALUES = ("rand", "bernoulli", "dropout", "normal", "multinomial", "uniform", "lowrank",
                    "rrelu", "empty", "poisson", "exponential", "geometric", "cauchy")

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


def check_sample(op, sample, what):
    try:
        want = op(sample.input, *sample.args, **sample.kwargs)
    except Exception as e:  # the CPU's error, whatever it is
        with pytest.raises(Exception) as got:
            op(to_rill(sample.input), *to_rill(sample.args), **to_rill(sample.kwargs))
        failed = stream_error()
        assert (type(got.value), first_line(got.value)) == (type(e), first_line(e)), what
        assert failed is None, (what, failed)
        return
    got = op(to_rill(sample.input), *to_rill(sample.args), **to_rill(sample.kwargs))
    want, got = tensors(want), tensors(got)
    assert len(got) == len(want), what
    values = not any(part in op.name for part in UNDEFINED_VALUES)
    for w, g in zip(want, got):
        g = g.cpu()
        assert (g.dtype, g.shape) == (w.dtype, w.shape), what
        if values:
            torch.testing.assert_close(g.resolve_conj().resolve_neg(),
                                       w.resolve_conj().resolve_neg(), equal_nan=True, rtol=1e-4,
                                       atol=1e-4, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("op", op_db, ids=[f"{o.name}.{o.variant_test_name}" for o in op_db])
def test_samples_of_every_op_give_the_cpus_results(op):
    if reason := skip_reason(op):
        pytest.skip(reason)
    ran = 0
    for dtype in DTYPES:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        for k, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=False)):
            if k == SAMPLES:
                break
            check_sample(op, sample, f"{dtype} sample {k}: {sample.summary()}")
            ran += 1
    assert stream_error() is None
    if ran == 0:
        pytest.skip("no sample in these dtypes")
