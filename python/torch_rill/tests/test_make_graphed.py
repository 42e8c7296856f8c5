# SPDX-License-Identifier: MIT
"""torch.rill.make_graphed_callables, modelled on PyTorch's tests of
torch.cuda.make_graphed_callables (test/test_cuda.py): graphed modules and
functions train as the same callables run eagerly on PyTorch's cpu device,
two modules graphed together chain, a module out of its graphing's
training state runs eagerly, and bad input is refused with the call named."""

import gc

import pytest
import torch
from torch import nn

TOL = dict(rtol=1e-5, atol=1e-5)


def _mlp(seed, *sizes):
    torch.manual_seed(seed)
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def _batches(n, *shapes):
    g = torch.Generator().manual_seed(1)
    return [tuple(torch.randn(*s, generator=g) for s in shapes) for _ in range(n)]


def _assert_params_close(rill_module, cpu_module):
    for (name, pr), pc in zip(rill_module.named_parameters(), cpu_module.parameters()):
        torch.testing.assert_close(pr.detach().cpu(), pc.detach(), **TOL, msg=name)


def test_a_graphed_module_trains_as_the_module_does_eagerly_on_cpu():
    cpu = _mlp(0, 16, 32, 4)
    model = _mlp(0, 16, 32, 4).to("rill")
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_r = torch.optim.SGD(model.parameters(), lr=0.1)
    sample = torch.randn(8, 16, device="rill")
    forward_before = model.forward
    graphed = torch.rill.make_graphed_callables(model, (sample,))
    assert graphed is model and model.forward is not forward_before
    for x, y in _batches(5, (8, 16), (8, 4)):
        opt_r.zero_grad(set_to_none=True)
        out = graphed(x.to("rill"))
        loss_r = nn.functional.mse_loss(out, y.to("rill"))
        loss_r.backward()
        opt_r.step()
        opt_c.zero_grad(set_to_none=True)
        loss_c = nn.functional.mse_loss(cpu(x), y)
        loss_c.backward()
        opt_c.step()
        torch.testing.assert_close(loss_r.detach().cpu(), loss_c.detach(), **TOL)
    _assert_params_close(model, cpu)


def _f(x, w, b):
    """Native rill kernels: addmm, relu, mul by a number, mm."""
    h = torch.relu(torch.addmm(b, x, w))
    return h * 2.0, torch.mm(h, w.t())


def test_a_graphed_function_gives_eager_outputs_and_gradients_for_the_args_that_require_them():
    """Against the same function run eagerly on rill (the same kernels)."""
    g = torch.Generator().manual_seed(2)
    w = torch.randn(12, 6, generator=g).to("rill").requires_grad_()
    b = torch.randn(6, generator=g).to("rill").requires_grad_()
    w_e = w.detach().clone().requires_grad_()
    b_e = b.detach().clone().requires_grad_()
    x_sample = torch.randn(5, 12, device="rill")  # requires no grad: it gets none
    f = torch.rill.make_graphed_callables(_f, (x_sample, w, b), num_warmup_iters=2)
    for (x,) in _batches(3, (5, 12)):
        x = x.to("rill")
        a, q = f(x, w, b)
        assert a.requires_grad and q.requires_grad
        (a.sum() + (q * q).sum()).backward()
        a_e, q_e = _f(x, w_e, b_e)
        (a_e.sum() + (q_e * q_e).sum()).backward()
        for got, want in ((a, a_e), (q, q_e), (w.grad, w_e.grad), (b.grad, b_e.grad)):
            torch.testing.assert_close(got.detach().cpu(), want.detach().cpu(), **TOL)
        for t in (w, b, w_e, b_e):
            t.grad = None
    assert x_sample.grad is None


def test_an_input_that_requires_grad_gets_its_gradient():
    x = torch.randn(4, 8, device="rill", requires_grad=True)
    w = torch.randn(8, 3, device="rill", requires_grad=True)
    f = torch.rill.make_graphed_callables(lambda x, w: torch.mm(x, w) * 3.0, (x, w))
    x_new = torch.randn(4, 8, device="rill", requires_grad=True)
    f(x_new, w).sum().backward()
    x_eager = x_new.detach().clone().requires_grad_()
    w_eager = w.detach().clone().requires_grad_()
    (torch.mm(x_eager, w_eager) * 3.0).sum().backward()
    torch.testing.assert_close(x_new.grad.cpu(), x_eager.grad.cpu(), **TOL)
    torch.testing.assert_close(w.grad.cpu(), w_eager.grad.cpu(), **TOL)
    with pytest.raises(ValueError, match="make_graphed_callables: arg 1 requires grad"):
        torch.rill.make_graphed_callables(
            lambda x, w: torch.mm(x, w), (x.detach(), w.detach()))(x.detach(),
                                                                  w.detach().requires_grad_())


def test_two_modules_graphed_together_chain_as_eager_ones_on_cpu():
    """PyTorch's documented example: module1 and module2 graphed together,
    module2's sample arg requiring grad as module1's output does."""
    cpu1, cpu2 = _mlp(3, 16, 24), _mlp(4, 24, 24, 4)
    m1, m2 = _mlp(3, 16, 24).to("rill"), _mlp(4, 24, 24, 4).to("rill")
    params_c = list(cpu1.parameters()) + list(cpu2.parameters())
    params_r = list(m1.parameters()) + list(m2.parameters())
    opt_c = torch.optim.SGD(params_c, lr=0.1)
    opt_r = torch.optim.SGD(params_r, lr=0.1)
    x_sample = torch.randn(8, 16, device="rill")
    h_sample = torch.randn(8, 24, device="rill", requires_grad=True)
    g1, g2 = torch.rill.make_graphed_callables((m1, m2), ((x_sample,), (h_sample,)),
                                               pool=torch.rill.graph_pool_handle())
    assert (g1, g2) == (m1, m2)
    for x, y in _batches(4, (8, 16), (8, 4)):
        opt_r.zero_grad(set_to_none=True)
        loss_r = nn.functional.mse_loss(g2(g1(x.to("rill"))), y.to("rill"))
        loss_r.backward()
        opt_r.step()
        opt_c.zero_grad(set_to_none=True)
        loss_c = nn.functional.mse_loss(cpu2(cpu1(x)), y)
        loss_c.backward()
        opt_c.step()
        torch.testing.assert_close(loss_r.detach().cpu(), loss_c.detach(), **TOL)
    _assert_params_close(m1, cpu1)
    _assert_params_close(m2, cpu2)


class _Switch(nn.Module):
    """Twice its linear layer's output in training, three times in eval."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        return self.lin(x) * (2.0 if self.training else 3.0)


def test_a_module_out_of_its_graphing_training_state_runs_its_original_forward():
    torch.manual_seed(5)
    m = _Switch().to("rill")
    sample = torch.randn(3, 6, device="rill")
    torch.rill.make_graphed_callables(m, (sample,))
    x = torch.randn(3, 6, device="rill")
    with torch.no_grad():
        base = m.lin(x).cpu()
    graphed_out = m(x)
    static_ptr = graphed_out.data_ptr()
    torch.testing.assert_close(graphed_out.detach().cpu(), base * 2.0, **TOL)
    m.eval()
    eager_out = m(x)
    torch.testing.assert_close(eager_out.detach().cpu(), base * 3.0, **TOL)
    assert eager_out.data_ptr() != static_ptr
    m.train()
    again = m(x)
    assert again.data_ptr() == static_ptr
    torch.testing.assert_close(again.detach().cpu(), base * 2.0, **TOL)


def test_a_module_graphed_in_eval_mode_replays_in_eval_and_runs_eagerly_in_training():
    torch.manual_seed(6)
    m = _Switch().to("rill").eval()
    sample = torch.randn(3, 6, device="rill")
    with torch.no_grad():
        torch.rill.make_graphed_callables(m, (sample,))
        x = torch.randn(3, 6, device="rill")
        base = m.lin(x).cpu()
        torch.testing.assert_close(m(x).cpu(), base * 3.0, **TOL)
        m.train()
        torch.testing.assert_close(m(x).cpu(), base * 2.0, **TOL)


def test_sample_args_that_are_not_tensors_or_not_on_rill_are_refused():
    lin = nn.Linear(4, 4).to("rill")
    with pytest.raises(AssertionError, match=r"make_graphed_callables: .*sample arg 1 is a int"):
        torch.rill.make_graphed_callables(lambda x, n: x * n, (torch.ones(4, device="rill"), 3))
    with pytest.raises(ValueError, match=r"sample arg 0 is on cpu, not on a rill device"):
        torch.rill.make_graphed_callables(lin, (torch.ones(2, 4),))
    with pytest.raises(ValueError, match=r"parameter weight is on cpu"):
        torch.rill.make_graphed_callables(nn.Linear(4, 4), (torch.ones(2, 4, device="rill"),))
    with pytest.raises(TypeError, match=r"sample_args must be a tuple of as many tuples"):
        torch.rill.make_graphed_callables((lin, lin), ((torch.ones(2, 4, device="rill"),),))
    with pytest.raises(TypeError, match="is not callable"):
        torch.rill.make_graphed_callables(3, (torch.ones(2, device="rill"),))


def test_a_module_with_hooks_is_refused_and_hooks_added_after_are_allowed():
    m = nn.Linear(4, 4).to("rill")
    sample = torch.ones(2, 4, device="rill")
    for register in (m.register_forward_hook, m.register_forward_pre_hook,
                     m.register_full_backward_hook):
        handle = register(lambda *args: None)
        with pytest.raises(AssertionError, match="make_graphed_callables: .*has hooks"):
            torch.rill.make_graphed_callables(m, (sample,))
        handle.remove()
    torch.rill.make_graphed_callables(m, (sample,))
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
    m(torch.ones(2, 4, device="rill"))
    assert seen == [torch.Size([2, 4])]


def test_calls_unlike_the_sample_args_are_refused():
    w = torch.randn(4, 4, device="rill", requires_grad=True)
    f = torch.rill.make_graphed_callables(lambda x: torch.mm(x, w), (torch.ones(2, 4,
                                                                                 device="rill"),))
    with pytest.raises(ValueError, match=r"arg 0 is torch.float32 \(1, 4\), the sample arg was "
                                         r"torch.float32 \(2, 4\)"):
        f(torch.ones(1, 4, device="rill"))
    with pytest.raises(TypeError, match="takes 1 tensors"):
        f(torch.ones(2, 4, device="rill"), torch.ones(2, 4, device="rill"))
    with pytest.raises(TypeError, match="not keywords"):
        f(x=torch.ones(2, 4, device="rill"))


def test_an_unused_input_is_refused_unless_allow_unused_input_and_then_has_no_gradient():
    x = torch.ones(3, device="rill", requires_grad=True)
    unused = torch.ones(3, device="rill", requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused_input=True"):
        torch.rill.make_graphed_callables(lambda a, b: a * 2.0, (x, unused))
    f = torch.rill.make_graphed_callables(lambda a, b: a * 2.0, (x, unused),
                                          allow_unused_input=True)
    a = torch.full((3,), 4.0, device="rill", requires_grad=True)
    b = torch.ones(3, device="rill", requires_grad=True)
    f(a, b).sum().backward()
    assert a.grad.cpu().tolist() == [2.0] * 3
    assert b.grad is None


def test_a_graphed_callable_dropped_gives_its_memory_back():
    torch.rill.synchronize()
    torch.rill.empty_cache()
    gc.collect()
    base = torch.rill.memory_allocated()
    m = _mlp(7, 32, 64, 8).to("rill")
    sample = torch.randn(16, 32, device="rill")
    torch.rill.make_graphed_callables(m, (sample,))
    m(torch.randn(16, 32, device="rill")).sum().backward()
    assert torch.rill.memory_allocated() > base
    del m, sample
    torch.rill.synchronize()
    assert torch.rill.memory_allocated() == base


def test_gradients_accumulate_over_backwards_as_eager_ones_do():
    """No zero_grad between backwards: each adds to .grad, as eagerly (the
    gradients handed to autograd are not the backward graph's static ones,
    which the next replay overwrites)."""
    m, e = _mlp(8, 8, 16, 4).to("rill"), _mlp(8, 8, 16, 4).to("rill")
    torch.rill.make_graphed_callables(m, (torch.randn(2, 8, device="rill"),))
    for (x,) in _batches(3, (2, 8)):
        x = x.to("rill")
        m(x).square().sum().backward()
        e(x).square().sum().backward()
    for pm, pe in zip(m.parameters(), e.parameters()):
        torch.testing.assert_close(pm.grad.cpu(), pe.grad.cpu(), **TOL)


def test_a_backward_after_another_call_of_the_same_graphed_callable_is_refused():
    w = torch.randn(4, 4, device="rill", requires_grad=True)
    f = torch.rill.make_graphed_callables(lambda x, w: torch.mm(x, w).relu(),
                                          (torch.randn(2, 4, device="rill"), w))
    first = f(torch.randn(2, 4, device="rill"), w).sum()
    f(torch.randn(2, 4, device="rill"), w)
    with pytest.raises(RuntimeError, match="ran again before this backward"):
        first.backward()
    w.grad = None
    f(torch.randn(2, 4, device="rill"), w).sum().backward()
    assert w.grad is not None
