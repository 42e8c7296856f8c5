# SPDX-License-Identifier: MIT
"""PyTorch's ops on rill tensors, checked against the same ops on the CPU."""

import pytest
import torch


def same(a, b, **tol):
    return torch.testing.assert_close(a.cpu(), b, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32, torch.uint8, torch.bool])
def test_element_wise_ops_with_broadcasting_and_promotion(dtype):
    g = torch.Generator().manual_seed(1)
    a = (torch.rand(4, 1, 3, generator=g) * 10).to(dtype)
    b = (torch.rand(5, 1, generator=g) * 10).to(dtype)
    ra, rb = a.to("rill"), b.to("rill")
    same(ra + rb, a + b)
    same(ra * rb, a * b)
    same(ra == rb, a == b)
    same(torch.maximum(ra, rb), torch.maximum(a, b))
    if dtype != torch.bool:
        same(ra * 2.5, a * 2.5)
        same(ra.sum(), a.sum())


def test_matrix_products_reductions_and_nn_functions():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(8, 16, generator=g)
    w = torch.randn(32, 16, generator=g)
    rx, rw = x.to("rill"), w.to("rill")
    same(rx @ rw.T, x @ w.T)
    same(torch.bmm(rx.expand(3, 8, 16), rw.T.expand(3, 16, 32)),
         torch.bmm(x.expand(3, 8, 16), w.T.expand(3, 16, 32)))
    same(torch.softmax(rx, 1), torch.softmax(x, 1))
    same(torch.log_softmax(rx, 0), torch.log_softmax(x, 0))
    same(rx.mean(0), x.mean(0))
    same(rx.amax(1), x.amax(1))
    same(torch.nn.functional.layer_norm(rx, (16,)), torch.nn.functional.layer_norm(x, (16,)))
    img = torch.randn(2, 3, 10, 10, generator=g)
    k = torch.randn(4, 3, 3, 3, generator=g)
    same(torch.nn.functional.conv2d(img.to("rill"), k.to("rill"), padding=1),
         torch.nn.functional.conv2d(img, k, padding=1))
    same(torch.nn.functional.max_pool2d(img.to("rill"), 2), torch.nn.functional.max_pool2d(img, 2))


def test_views_in_place_ops_and_out_arguments():
    x = torch.arange(24.0).reshape(4, 6)
    r = x.to("rill")
    same(r.T.contiguous(), x.T.contiguous())
    same(r[1:3, ::2], x[1:3, ::2])
    v = r[:, 1]
    v.add_(100)  # writes through the view into r
    x[:, 1].add_(100)
    same(r, x)
    out = torch.empty(0, device="rill")
    torch.add(r, r, out=out)  # out= resizes
    same(out, x + x)
    r.mul_(2).sub_(1)
    same(r, x * 2 - 1)
    assert r.view(-1).shape == (24,)
    assert r.reshape(6, 4).is_contiguous()


def test_data_dependent_ops_and_scalars():
    x = torch.tensor([0.0, 3.0, 0.0, 1.0, 3.0])
    r = x.to("rill")
    same(r.nonzero(), x.nonzero())
    same(torch.unique(r), torch.unique(x))
    assert r[1].item() == 3.0
    assert r.tolist() == x.tolist()
    assert bool((r > 2).any())
    same(r[r > 0], x[x > 0])


def test_random_numbers_follow_the_seed():
    torch.manual_seed(5)
    a = torch.randn(100, device="rill")
    torch.manual_seed(5)
    b = torch.randn(100, device="rill")
    assert torch.equal(a.cpu(), b.cpu())
    state = torch.rill.get_rng_state()
    c = torch.rand(10, device="rill")
    torch.rill.set_rng_state(state)
    assert torch.equal(torch.rand(10, device="rill").cpu(), c.cpu())
    g = torch.Generator(device="rill").manual_seed(9)
    d = torch.randn(10, device="rill", generator=g)
    g.manual_seed(9)
    assert torch.equal(torch.randn(10, device="rill", generator=g).cpu(), d.cpu())
    r = torch.empty(1000, device="rill").uniform_(2.0, 3.0)
    assert 2.0 <= r.min().item() and r.max().item() < 3.0


def test_storage_and_serialization(tmp_path):
    t = torch.arange(6.0, device="rill").reshape(2, 3)
    assert t.untyped_storage().device == torch.device("rill:0")
    path = tmp_path / "t.pt"
    torch.save({"t": t, "cpu": t.cpu()}, path)
    loaded = torch.load(path)
    assert loaded["t"].device == torch.device("rill:0")
    assert torch.equal(loaded["t"].cpu(), loaded["cpu"])
    assert torch.load(path, map_location="cpu")["t"].device.type == "cpu"


def test_views_alias_their_base_and_writes_reach_it():
    """unfold, view_as_real and view_as_complex have per-device kernels in
    PyTorch; through the fallback they were copies on a device the host
    cannot read, and these writes were lost."""
    r = torch.arange(8., device="rill")
    u = r.unfold(0, 2, 2)
    u.mul_(10)
    assert u._base is r and r.cpu().tolist() == [0., 10., 20., 30., 40., 50., 60., 70.]
    z = torch.complex(torch.arange(4.), torch.ones(4)).to("rill")
    torch.view_as_real(z)[:, 1].zero_()
    assert z.cpu().tolist() == [0j, 1 + 0j, 2 + 0j, 3 + 0j]
    f = torch.arange(8., device="rill")
    torch.view_as_complex(f.view(4, 2)).mul_(2)
    assert f.cpu().tolist() == [0., 2., 4., 6., 8., 10., 12., 14.]


def test_every_view_with_per_device_kernels_has_the_devices():
    """A view op that PyTorch implements per device (a CPU kernel, no
    composite one) must have rill's: the fallback cannot make views."""
    missing = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        for schema in torch._C._jit_get_schemas_for_operator(name):
            op = name + ("." + schema.overload_name if schema.overload_name else "")
            out = schema.returns[0].alias_info if schema.returns else None
            if out is None or out.is_write or any(
                    a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
                continue

            def has(key):
                try:
                    return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)
                except RuntimeError:  # a schema only TorchScript knows (aten::numpy_T.a)
                    return True

            if has("CPU") and not any(has(k) for k in (
                    "PrivateUse1", "CompositeExplicitAutograd", "CompositeImplicitAutograd",
                    "CompositeExplicitAutogradNonFunctional")):
                missing.append(op)
    assert missing == ["aten::_nested_view_from_buffer"]  # nested tensors: not on rill


def test_indexing_takes_cpu_index_tensors_as_on_cuda():
    """x[i], x[mask] and x[i] = v with i or mask on the CPU work for a tensor
    of the device, as on CUDA (PyTorch's indexing moves the indices);
    index_select keeps PyTorch's device check."""
    cpu = torch.arange(12.).view(3, 4)
    x = cpu.to("rill")
    i, mask = torch.tensor([0, 2]), cpu[:, 0] > 3
    for got, want in ((x[i], cpu[i]), (x[:, i], cpu[:, i]), (x[i, i], cpu[i, i]),
                      (x[mask], cpu[mask])):
        assert torch.equal(got.cpu(), want)
    y, y_cpu = x.clone(), cpu.clone()
    y[i] = 7.
    y_cpu[i] = 7.
    y.index_put_((i, i), torch.tensor([1., 2.], device="rill"), accumulate=True)
    y_cpu.index_put_((i, i), torch.tensor([1., 2.]), accumulate=True)
    assert torch.equal(y.cpu(), y_cpu)
    with pytest.raises(RuntimeError, match="same device"):
        torch.index_select(x, 0, i)
    with pytest.raises(RuntimeError, match="indices should be either on cpu"):
        cpu[i.to("rill")]


def test_zero_gradients_that_hold_no_memory_reach_the_inputs():
    """sgn's gradient of real numbers is one of PyTorch's ZeroTensors (zeros
    that hold no memory, made by _efficientzerotensor on the device): with
    no rill tensor among its arguments it failed, and so did the backward."""
    x = torch.randn(5, generator=torch.Generator().manual_seed(3))
    for f in (torch.sgn, lambda t: torch.sgn(t) * t, lambda t: (t.sgn() + t * 2).exp()):
        xc, xr = x.clone().requires_grad_(), x.to("rill").requires_grad_()
        f(xc).sum().backward()
        f(xr).sum().backward()
        same(xr.grad, xc.grad)
    z = torch._efficientzerotensor((2, 3), dtype=torch.float64, device="rill")
    assert z._is_zerotensor() and z.device == torch.device("rill:0") and z.dtype == torch.float64
    same(z + 1, torch.ones(2, 3, dtype=torch.float64))
    same(z * torch.full((2, 3), 4., device="rill", dtype=torch.float64),
         torch.zeros(2, 3, dtype=torch.float64))
