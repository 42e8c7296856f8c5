# SPDX-License-Identifier: MIT
"""copy_ and .to() between dtypes and layouts on the rill device the tests
run on: rill:0, a CPU device, or with the stand-in CUDA driver
(torch_rill_tests_fakecuda) a device the host cannot read, whose copies go
through host memory. Every copy leaves the destination's whole storage as
the CPU's copy leaves it: its elements converted as PyTorch converts them,
and the memory between them untouched."""

import pytest
import torch
from conftest import assert_stream_works, first_line

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
          torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
SHAPE = (3, 4, 5)


def values(dtype, n, seed):
    """n values of dtype, mixed in sign and size, with no NaN."""
    x = torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 70
    if dtype.is_complex:
        return torch.complex(x, x.flip(0)).to(dtype)
    return x.to(dtype) if dtype.is_floating_point else x.round().to(dtype)


def sources(dtype):
    """(name, storage, view of SHAPE): contiguous, transposed, sliced with
    gaps, expanded, and a zero-dimensional one expanded."""
    yield "contiguous", values(dtype, 60, 1), lambda b: b.view(SHAPE)
    yield "transposed", values(dtype, 60, 2), lambda b: b.view(5, 4, 3).transpose(0, 2)
    yield "sliced", values(dtype, 240, 3), lambda b: b.view(3, 8, 10)[:, ::2, 1::2]
    yield "expanded", values(dtype, 4, 4), lambda b: b.view(1, 4, 1).expand(SHAPE)
    yield "scalar", values(dtype, 1, 5), lambda b: b.view(()).expand(SHAPE)


def destinations(dtype):
    """(storage, view of SHAPE) pairs: the view is what is written, the whole
    storage what is compared."""
    base = values(dtype, 60, 6)
    yield "contiguous", base, lambda b: b.view(SHAPE)
    yield "transposed", base, lambda b: b.view(5, 4, 3).transpose(0, 2)
    yield "sliced", values(dtype, 240, 7), lambda b: b.view(3, 8, 10)[:, ::2, 1::2]
    yield "column", values(dtype, 120, 8), lambda b: b.view(3, 4, 10)[..., 2:7]


@pytest.mark.parametrize("src_dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dst_dtype", DTYPES, ids=str)
def test_copy_between_dtypes_and_layouts_equals_the_cpus(src_dtype, dst_dtype):
    for src_name, src_base, src_view in sources(src_dtype):
        src, src_on_rill = src_view(src_base), src_view(src_base.to("rill"))
        for dst_name, base, view_of in destinations(dst_dtype):
            want = base.clone()
            view_of(want).copy_(src)
            for where, dst, source in (("rill to rill", base.to("rill"), src_on_rill),
                                       ("cpu to rill", base.to("rill"), src),
                                       ("rill to cpu", base.clone(), src_on_rill)):
                view_of(dst).copy_(source)
                assert torch.equal(dst.cpu(), want), (where, src_name, dst_name)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_to_and_contiguous_keep_values(dtype):
    x = values(dtype, 60, 9).view(SHAPE)
    r = x.to("rill")
    assert torch.equal(r.transpose(0, 2).contiguous().cpu(), x.transpose(0, 2).contiguous())
    assert torch.equal(r[:, 1::2].contiguous().cpu(), x[:, 1::2].contiguous())
    for other in DTYPES:
        assert torch.equal(r.to(other).cpu(), x.to(other)), other
        assert torch.equal(r.transpose(1, 2).to(other).cpu(), x.transpose(1, 2).to(other)), other


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_item_reads_one_element_of_any_shape_and_layout(dtype):
    """Tensor.item() of one element in a tensor of 0, 1 or 2 dimensions,
    contiguous or a view at an offset of a transposed tensor, as on the
    CPU (item() of a [1] tensor failed with a broadcast error)."""
    x = values(dtype, 60, 11).view(SHAPE)
    r = x.to("rill")
    for pick in (lambda t: t[1, 2, 3], lambda t: t[1, 2, 3:4], lambda t: t[1, 2:3, 3:4],
                 lambda t: t.transpose(0, 2)[4:5, 1, 2:3], lambda t: t.flatten()[7:8].view(1, 1)):
        assert pick(r).item() == pick(x).item()
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        r[0, 0, :2].item()



SHAPE_PAIRS = [((0, 2, 2), (2, 2)), ((3, 0), (3, 1)), ((0,), (0,)), ((2, 0), (0,)),
               ((0,), (3,)), ((2,), (0,)), ((1,), (3,)), ((2, 3), (3, 2)), ((4, 3), (3,))]


@pytest.mark.parametrize("dst_shape,src_shape", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("src_dtype", [torch.float32, torch.int64], ids=str)
def test_copy_broadcasts_into_empty_and_refuses_other_shapes_as_the_cpu(dst_shape, src_shape,
                                                                       src_dtype):
    """copy_ checks its shapes as the CPU does, empty ones included: a
    broadcast into an empty destination is a copy of nothing (it raised
    rill_op_convert's refusal, or rill's copy's), and an empty source
    into a destination of other elements raises (it was taken in
    silence)."""
    src = values(src_dtype, torch.Size(src_shape).numel(), 12).view(src_shape)
    try:
        want = torch.empty(dst_shape).copy_(src)
    except RuntimeError as e:
        want = e
    for where, dst, source in (("rill to rill", torch.empty(dst_shape, device="rill"),
                                src.to("rill")),
                               ("cpu to rill", torch.empty(dst_shape, device="rill"), src),
                               ("rill to cpu", torch.empty(dst_shape), src.to("rill"))):
        if isinstance(want, Exception):
            with pytest.raises(RuntimeError) as got:
                dst.copy_(source)
            assert first_line(got.value) == first_line(want), where
        else:
            assert torch.equal(dst.copy_(source).cpu(), want), where
    assert_stream_works()

MATH_BIT_VIEWS = [
    ("conj", lambda t: t.conj()),
    ("conj of a transposed", lambda t: t.t().conj()),
    ("negative imag", lambda t: t.conj().imag),  # a float view with the negative bit
    ("plain", lambda t: t),
]


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("src_name,src_view", MATH_BIT_VIEWS, ids=[m[0] for m in MATH_BIT_VIEWS])
@pytest.mark.parametrize("dst_name,dst_view", MATH_BIT_VIEWS, ids=[m[0] for m in MATH_BIT_VIEWS])
def test_copies_resolve_conjugate_and_negative_views_as_the_cpu(src_name, src_view, dst_name,
                                                                dst_view):
    """A conjugate or negative view (z.conj(), z.conj().imag) copied either
    way, or written into: rill copied through PyTorch's fallback for those
    bits, which copied again without end and crashed the interpreter."""
    src_base = values(torch.complex64, 16, 10).view(4, 4)
    dst_base = values(torch.complex64, 16, 11).view(4, 4)
    src = src_view(src_base)
    want = dst_base.clone()
    dst_view(want).copy_(src)
    for where, dst, source in (("rill to rill", dst_base.to("rill"), src_view(src_base.to("rill"))),
                               ("cpu to rill", dst_base.to("rill"), src),
                               ("rill to cpu", dst_base.clone(), src_view(src_base.to("rill")))):
        dst_view(dst).copy_(source)
        assert torch.equal(dst.cpu(), want), where
    on_rill = src_view(src_base.to("rill"))
    for got, expected in ((on_rill.clone(), src.clone()), (on_rill.cpu(), src),
                          (on_rill * 2, src * 2), (on_rill.abs(), src.abs())):
        assert torch.equal(got.cpu().resolve_conj().resolve_neg(),
                           expected.resolve_conj().resolve_neg())
