# SPDX-License-Identifier: MIT
"""float16 tensors (storage; the ops compute in float32 and round once),
in-place add_, conversions, and randn with its seed."""

import numpy as np
import pytest

import rill

F16, F32 = np.float16, np.float32


def halves(shape, seed):
    return np.random.default_rng(seed).uniform(-4, 4, size=shape).astype(F16)


def test_float16_tensors_keep_their_bits():
    a = halves((5, 7), 1)
    t = rill.Tensor(a)
    assert t.dtype is rill.float16 and t.nbytes == a.size * 2
    got = t.numpy()
    assert got.dtype == F16 and np.array_equal(got.view(np.uint16), a.view(np.uint16))


@np.errstate(over="ignore")  # 65520 and -1e9 overflow to infinity, as they should
def test_converting_to_float16_rounds_as_numpy_does():
    x = np.array([0.1, 1 / 3, 65504, 65519.99, 65520, -1e9, 1e-8, 6e-8, 2.0 ** -24 * 1.5],
                 dtype=F32)
    t = rill.Tensor(x, rill.float16)
    assert np.array_equal(t.numpy().view(np.uint16), x.astype(F16).view(np.uint16))
    assert np.array_equal(rill.Tensor(x).half().numpy().view(np.uint16),
                          x.astype(F16).view(np.uint16))
    back = t.float()
    assert back.dtype is rill.float32
    assert np.array_equal(back.numpy(), x.astype(F16).astype(F32))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "matmul", "sum"])
def test_ops_on_halves_are_the_float32_op_rounded_once(op):
    a, b = halves((6, 6), 2), halves((6, 6), 3)
    ta, tb = rill.Tensor(a), rill.Tensor(b)
    fa, fb = a.astype(F32), b.astype(F32)
    got = {"add": lambda: ta + tb, "sub": lambda: ta - tb, "mul": lambda: ta * tb,
           "matmul": lambda: ta @ tb, "sum": lambda: rill.ops.sum(ta)}[op]()
    want = {"add": fa + fb, "sub": fa - fb, "mul": fa * fb, "matmul": fa @ fb,
            "sum": np.array(fa.sum(dtype=np.float64), dtype=F32)}[op]
    assert got.dtype is rill.float16
    if op in ("add", "sub", "mul"):  # exact in float32, so one rounding decides every bit
        assert np.array_equal(got.numpy().view(np.uint16), want.astype(F16).view(np.uint16))
    else:
        np.testing.assert_allclose(got.numpy().astype(F32), want, rtol=2e-3, atol=1e-2)


def test_halves_and_numbers():
    a = halves((3, 4), 4)
    t = rill.Tensor(a)
    for got, want in ((t + 2, a.astype(F32) + 2), (2 - t, 2 - a.astype(F32)),
                      (t * 0.5, a.astype(F32) * 0.5), (-t, -a.astype(F32))):
        assert got.dtype is rill.float16
        assert np.array_equal(got.numpy(), want.astype(F16))


def test_a_half_and_a_float_give_a_float():
    a, b = halves((4,), 5), np.arange(4, dtype=F32)
    got = rill.Tensor(a) + rill.Tensor(b)
    assert got.dtype is rill.float32
    assert np.array_equal(got.numpy(), a.astype(F32) + b)
    assert (rill.Tensor(b) * rill.Tensor(a)).dtype is rill.float32


def test_makers_take_float16():
    assert np.array_equal(rill.ones(2, 3, dtype=rill.float16).numpy(), np.ones((2, 3), F16))
    assert rill.zeros(4, dtype="float16").numpy().dtype == F16
    assert np.array_equal(rill.full((2,), 7.25, dtype=rill.float16).numpy(), [7.25, 7.25])
    e = rill.empty(3, 2, dtype=rill.float16)
    assert e.dtype is rill.float16 and e.shape == (3, 2) and e.nbytes == 12
    assert rill.ones(0, dtype=rill.float16).numpy().shape == (0,)


def test_add_in_place():
    t = rill.ones(1000, 1000, dtype=rill.float16)
    assert t.add_(2) is t
    assert np.all(t.numpy() == 3)
    f = rill.Tensor(np.arange(4, dtype=F32))
    f.add_(rill.Tensor(np.ones(4, F16)), alpha=2)
    assert np.array_equal(f.numpy(), np.arange(4) + 2)
    h = rill.Tensor(np.arange(4, dtype=F16))
    h.add_(rill.Tensor(np.full(4, 0.5, F32)))
    assert h.dtype is rill.float16 and np.array_equal(h.numpy(), np.arange(4) + 0.5)
    with pytest.raises(TypeError, match="other must be"):
        h.add_("x")
    with pytest.raises(ValueError, match="shapes"):
        h.add_(rill.ones(5))
    with pytest.raises(TypeError, match="alpha must be"):
        h.add_(1, alpha=None)


def test_to_returns_the_tensor_itself_for_its_own_dtype():
    t = rill.ones(3)
    assert t.to(rill.float32) is t
    assert t.to(rill.float16).dtype is rill.float16
    with pytest.raises(TypeError, match="dtype must be rill.float32 or rill.float16"):
        t.to("int8")


def test_randn_is_standard_normal():
    x = rill.randn(1000, 1000).numpy()
    assert x.dtype == F32 and x.shape == (1000, 1000)
    assert abs(x.mean()) < 0.005 and abs(x.std() - 1) < 0.005


def test_randn_depends_on_the_seed_and_the_order_of_calls():
    rill.manual_seed(1234)
    a, b = rill.randn(100).numpy(), rill.randn(100).numpy()
    rill.manual_seed(1234)
    assert np.array_equal(rill.randn(100).numpy(), a)
    assert np.array_equal(rill.randn(100).numpy(), b)
    assert not np.array_equal(a, b)
    rill.manual_seed(1234)
    h = rill.randn(100, dtype=rill.float16)
    assert h.dtype is rill.float16 and np.array_equal(h.numpy(), a.astype(F16))
    with pytest.raises(TypeError, match="seed must be an int"):
        rill.manual_seed(1.5)
    with pytest.raises(TypeError, match="dtype must be"):
        rill.randn(3, dtype=np.int32)
    with pytest.raises(ValueError, match="negative"):
        rill.randn(-1)


def test_half_ops_run_on_the_current_stream():
    s = rill.Stream()
    a = rill.Tensor(halves((64, 64), 6))
    rill.synchronize()
    with rill.stream(s):
        c = a @ a + 1
    assert c.stream == s
    want = (a.numpy().astype(F32) @ a.numpy().astype(F32)).astype(F16).astype(F32) + 1
    np.testing.assert_allclose(c.numpy().astype(F32), want, rtol=2e-3)


def test_elementwise_ops_and_fills_on_halves_need_no_float32_scratch(monkeypatch):
    from rill import _ops

    def refuse(*args, **kwargs):
        raise AssertionError("converted to float32")
    monkeypatch.setattr(_ops, "_via_float32", refuse)
    monkeypatch.setattr(_ops, "converted", refuse)
    a, b = halves((33, 5), 7), halves((33, 5), 8)
    ta, tb = rill.Tensor(a), rill.Tensor(b)
    fa, fb = a.astype(F32), b.astype(F32)
    for got, want in ((ta + tb, fa + fb), (ta - tb, fa - fb), (ta * tb, fa * fb),
                      (ta + 1.5, fa + 1.5), (ta - 1, fa - 1), (3 + ta, fa + 3),
                      (rill.ops.add(ta, tb, alpha=0.5), fa + F32(0.5) * fb)):
        assert got.dtype is rill.float16
        assert np.array_equal(got.numpy().view(np.uint16), want.astype(F16).view(np.uint16))
    ta.add_(tb, alpha=2)
    assert np.array_equal(ta.numpy(), (fa + 2 * fb).astype(F16))
    assert np.array_equal(rill.full((3,), 0.1, dtype=rill.float16).numpy(),
                          np.full(3, 0.1, F32).astype(F16))


def _conv2d_reference(x, w):
    """NCHW, stride 1, no padding, in float64."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    out = np.zeros((n, k, h - r + 1, wd - s + 1))
    for ri in range(r):
        for si in range(s):
            patch = x[:, :, ri:ri + h - r + 1, si:si + wd - s + 1].astype(np.float64)
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, ri, si].astype(np.float64))
    return out


def test_matmul_sum_conv2d_on_halves_run_the_f16_ops(monkeypatch):
    """rill_op_matmul_f16, rill_op_sum_f16 and rill_op_conv2d_f16: no
    float32 copies of the inputs, and the float64 result rounded once to a
    half (within half a half's spacing, plus float32 accumulation)."""
    from rill import _ops

    def refuse(*args, **kwargs):
        raise AssertionError("converted to float32")
    monkeypatch.setattr(_ops, "_via_float32", refuse)
    monkeypatch.setattr(_ops, "converted", refuse)
    a, b = halves((70, 300), 11), halves((300, 40), 12)
    x, w = halves((2, 3, 9, 8), 13), halves((4, 3, 3, 2), 14)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    # (result, float64 reference, its terms' magnitudes summed, terms per element)
    cases = ((rill.Tensor(a) @ rill.Tensor(b), a64 @ b64, np.abs(a64) @ np.abs(b64), 300),
             (rill.ops.sum(rill.Tensor(a)), np.array(a64.sum()), np.array(np.abs(a64).sum()), 1),
             (rill.ops.conv2d(rill.Tensor(x), rill.Tensor(w)), _conv2d_reference(x, w),
              _conv2d_reference(np.abs(x), np.abs(w)), 18))
    for got, want, magnitude, terms in cases:
        assert got.dtype is rill.float16 and got.shape == want.shape
        g = got.numpy().astype(np.float64)
        spacing = np.spacing(np.abs(want).astype(F16)).astype(np.float64)
        accumulation = (terms + 2) * 2.0 ** -24 * magnitude
        assert np.all(np.abs(g - want) <= 0.5 * spacing + accumulation)


def test_matmul_and_conv2d_of_a_half_and_a_float_give_a_float():
    a, b = halves((5, 6), 15), halves((6, 3), 16)
    got = rill.Tensor(a) @ rill.Tensor(b.astype(F32))
    assert got.dtype is rill.float32
    np.testing.assert_allclose(got.numpy(), a.astype(F32) @ b.astype(F32), rtol=1e-5, atol=1e-5)
    x, w = halves((1, 2, 5, 5), 17), halves((3, 2, 2, 2), 18)
    got = rill.ops.conv2d(rill.Tensor(x.astype(F32)), rill.Tensor(w))
    assert got.dtype is rill.float32
    np.testing.assert_allclose(got.numpy(), _conv2d_reference(x, w), rtol=1e-5, atol=1e-5)


def test_empty_products_and_sums_of_halves_are_zero():
    z = rill.Tensor(np.zeros((3, 0), F16)) @ rill.Tensor(np.zeros((0, 2), F16))
    assert z.dtype is rill.float16 and np.array_equal(z.numpy(), np.zeros((3, 2), F16))
    s = rill.ops.sum(rill.Tensor(np.zeros((0,), F16)))
    assert s.dtype is rill.float16 and s.numpy() == 0
