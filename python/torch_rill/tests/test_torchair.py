# SPDX-License-Identifier: MIT
"""Seed 002 (torchair's in-graph multi-stream in reduce-overhead mode) on
real PyTorch with the device rill: the page's code as written in
python/tests/seeds/seed002_torchair_multistream.txt, whose import lines
(`import rill.compat.torch as torch`, `rill.compat.torch_npu`,
`rill.compat.torchair`) give PyTorch itself, torch.npu served by torch.rill
and torchair's API on torch_rill's custom ops (torch.ops.rill.*). Its
results are checked against the same computation on PyTorch's cpu device;
then what the backend must do beyond the page: the ops in the graph
torch.compile hands it, replays, tagged-event order, outputs that later
calls leave alone, and the errors."""

import doctest
import os
import sys

import pytest
import torch

SEED = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "seeds",
                    "seed002_torchair_multistream.txt")


def page_examples():
    """The page's example: the doctest lines before "Checks:" (the checks
    after it are for rill's own tensors, which python/tests runs)."""
    with open(SEED, encoding="utf-8") as f:
        text = f.read().split("\nChecks:")[0]
    return doctest.DocTestParser().get_examples(text)


@pytest.fixture(scope="module")
def tng():
    os.environ.pop("RILL_COMPAT_TORCH", None)  # the default: PyTorch where torch_rill is found
    for name in [m for m in sys.modules if m.startswith("rill.compat.torch")]:
        del sys.modules[name]
    import rill.compat.torchair as tng

    torch._dynamo.reset()
    return tng


def compiled(tng, model, mode="reduce-overhead"):
    from rill.compat.torchair.configs.compiler_config import CompilerConfig

    config = CompilerConfig()
    config.mode = mode
    backend = tng.get_npu_backend(compiler_config=config)
    return torch.compile(model, backend=backend, dynamic=False, fullgraph=True), backend


def expected(in1, in2, in3, in4):
    """The page's five results, computed eagerly on PyTorch's cpu device."""
    c1, c2, c3, c4 = (t.cpu() for t in (in1, in2, in3, in4))
    mm = torch.mm(c3, c4)
    return (torch.add(c1, c2), mm, mm, torch.add(c3, c4),
            torch.ones(1000, 1000, dtype=torch.float16).add_(2))


def check(result, want):
    assert len(result) == 5
    for index, (got, exp) in enumerate(zip(result, want)):
        assert got.device.type == "rill" and got.dtype == torch.float16, index
        if index in (1, 2):  # products: float16's precision, sums in another order
            torch.testing.assert_close(got.cpu(), exp, rtol=2e-3, atol=0.05)
        else:
            assert torch.equal(got.cpu(), exp), index


def test_seed002_runs_unchanged_and_replays(tng):
    namespace = {}
    test = doctest.DocTest(page_examples(), namespace, "seed002", SEED, 0, None)
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out = []
    # The page prints tensors on "cuda:0"; PyTorch names the device rill.
    for example in test.examples:
        example.want = example.want.replace("'cuda:0'", "'rill:0'")
    result = runner.run(test, out=out.append, clear_globs=False)
    assert result.failed == 0, "".join(out)
    ns = test.globs
    model, backend, first = ns["model"], ns["npu_backend"], ns["result"]
    inputs = [ns[name] for name in ("in1", "in2", "in3", "in4")]
    assert all(t.device.type == "rill" for t in inputs)
    check(first, expected(*inputs))
    assert (backend.captures, backend.replays) == (0, 0)  # the first call warms up

    second_in = [torch.randn(1000, 1000, dtype=torch.float16).to("rill") for _ in range(4)]
    second = model(*second_in)
    assert (backend.captures, backend.replays) == (1, 1)
    third_in = [torch.randn(1000, 1000, dtype=torch.float16).to("rill") for _ in range(4)]
    third = model(*third_in)
    assert (backend.captures, backend.replays) == (1, 2)
    assert len(backend.graphs) == 1  # one graph: no recompilation, no break
    check(third, expected(*third_in))
    check(second, expected(*second_in))  # the third call left the second's results alone
    check(first, expected(*inputs))


def test_the_ops_reach_the_backend_and_are_no_dead_code(tng):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.event = tng.ops.npu_create_tagged_event(tag="t-graph")

        def forward(self, x):
            y = x + 1
            tng.ops.npu_tagged_event_record(self.event)
            with tng.scope.npu_stream_switch("t-graph-s", 0):
                tng.ops.npu_tagged_event_wait(self.event)
                z = y * 2
                tng.ops.npu_record_tagged_stream(z, "t-graph-s")
            return z

    model, backend = compiled(tng, Model(), mode="max-autotune")
    x = torch.randn(64, device="rill")
    assert torch.equal(model(x).cpu(), (x.cpu() + 1) * 2)
    (gm,) = backend.graphs
    names = ["stream_switch_enter", "tagged_event_record", "tagged_event_wait",
             "record_tagged_stream", "stream_switch_exit"]

    def ops():
        return [n.target._qualified_op_name.split("::")[1] for n in gm.graph.nodes
                if n.op == "call_function" and str(n.target).startswith("rill.")]

    assert sorted(ops()) == sorted(names)
    gm.graph.eliminate_dead_code()
    assert sorted(ops()) == sorted(names)


def _ordered_model(tng, wait):
    """A slow chain of products on one tagged stream in front of the op
    whose event another tagged stream waits for (with wait) before reading
    its result."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.event = tng.ops.npu_create_tagged_event(tag="t-order")

        def forward(self, x, eye):
            with tng.scope.npu_stream_switch("t-order-1"):
                y = x
                for _ in range(24):
                    y = torch.mm(y, eye)  # y stays x, late
                z = y + 1
                tng.ops.npu_tagged_event_record(self.event)
            with tng.scope.npu_stream_switch("t-order-2"):
                if wait:
                    tng.ops.npu_tagged_event_wait(self.event)
                out = z * 2
            return out

    return Model()


@pytest.mark.parametrize("mode", ["max-autotune", "reduce-overhead"])
def test_a_tagged_event_orders_two_tagged_streams(tng, mode):
    model, backend = compiled(tng, _ordered_model(tng, wait=True), mode)
    eye = torch.eye(256, device="rill")
    for call in range(4):
        x = torch.randn(256, 256, device="rill")
        out = model(x, eye)
        assert torch.equal(out.cpu(), (x.cpu() + 1) * 2), f"call {call}"
    if mode == "reduce-overhead":
        assert (backend.captures, backend.replays) == (1, 3)


def test_inputs_the_graph_writes_get_written(tng):
    def step(x, y):
        x.add_(1)
        return x * y

    model, backend = compiled(tng, step)
    for call in range(3):
        x, y = torch.randn(32, device="rill"), torch.randn(32, device="rill")
        x0 = x.cpu()
        out = model(x, y)
        assert torch.equal(x.cpu(), x0 + 1), call
        assert torch.equal(out.cpu(), (x0 + 1) * y.cpu()), call
    assert (backend.captures, backend.replays) == (1, 2)


def test_new_shapes_compile_and_capture_again(tng):
    event = tng.ops.npu_create_tagged_event(tag="t-shapes")

    def f(x):
        with tng.scope.npu_stream_switch("t-shapes"):
            y = x * 3
            tng.ops.npu_tagged_event_record(event)
        tng.ops.npu_tagged_event_wait(event)  # y is read on the stream before
        return y + 1

    model, backend = compiled(tng, f)
    for n in (8, 8, 8, 5, 5, 5, 8):
        x = torch.randn(n, device="rill")
        assert torch.equal(model(x).cpu(), x.cpu() * 3 + 1), n
    assert len(backend.graphs) == 2
    assert (backend.captures, backend.replays) == (2, 5)


def test_parameters_are_read_in_place_not_copied(tng, monkeypatch):
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 8).to("rill")
    model, backend = compiled(tng, layer)
    x = torch.randn(4, 16, device="rill")
    with torch.no_grad():
        model(x)
        model(x)  # captured
        copied = []
        copy = torch.Tensor.copy_
        monkeypatch.setattr(torch.Tensor, "copy_",
                            lambda self, src, *a, **k: copied.append(src) or copy(self, src, *a, **k))
        out = model(x)
        monkeypatch.undo()
        # x alone is copied in; the weight and the bias are read in place.
        assert len(copied) == 1 and copied[0] is x
        torch.testing.assert_close(out.cpu(), x.cpu() @ layer.weight.cpu().T + layer.bias.cpu())
        # An optimizer's in-place update is what the next replay reads.
        layer.weight.mul_(2)
        layer.bias.add_(1)
        out = model(x)
        torch.testing.assert_close(out.cpu(), x.cpu() @ layer.weight.cpu().T + layer.bias.cpu())
    assert (backend.captures, backend.replays) == (1, 3)


def test_a_replaced_parameter_is_captured_again_and_the_old_one_left_alone(tng):
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 8).to("rill")
    model, backend = compiled(tng, layer)
    x = torch.randn(4, 16, device="rill")
    with torch.no_grad():
        model(x)
        model(x)
        old = layer.weight
        old_values = old.cpu()
        layer.weight = torch.nn.Parameter(torch.randn(8, 16, device="rill"))
        for _ in range(2):
            out = model(x)
            torch.testing.assert_close(out.cpu(),
                                       x.cpu() @ layer.weight.cpu().T + layer.bias.cpu())
    assert torch.equal(old.cpu(), old_values)
    assert backend.captures == 2 and len(backend.graphs) == 1


def test_an_op_that_synchronizes_is_named_when_the_capture_refuses_it(tng):
    def f(x):
        y = x * 2
        return y.cpu().to(x.device) + 1

    model, backend = compiled(tng, f)
    x = torch.randn(16, device="rill")
    assert torch.equal(model(x).cpu(), x.cpu() * 2 + 1)  # the warm-up runs it eagerly
    with pytest.raises(RuntimeError, match=r"Tensor\.cpu \(FX node cpu, test_torchair\.py:\d+: "
                                           r"return y\.cpu\(\).*\) cannot be captured into a "
                                           r"rill graph: copy_ to the CPU"):
        model(x)
    assert not torch.rill.is_current_stream_capturing()
    assert torch.equal((x + 1).cpu(), x.cpu() + 1)  # the device works on


def test_outputs_sharing_an_input_are_refused(tng):
    model, _ = compiled(tng, lambda x: x.view(2, -1))
    with pytest.raises(RuntimeError, match="output 0 shares memory with input 0"):
        model(torch.randn(8, device="rill"))


def test_inputs_off_rill_are_refused(tng):
    model, _ = compiled(tng, lambda x: x + 1)
    with pytest.raises(ValueError, match="input 0 is on cpu"):
        model(torch.randn(8))


def test_a_graph_that_draws_random_numbers_is_refused(tng):
    model, _ = compiled(tng, lambda x: x + torch.randn(8, device=x.device))
    with pytest.raises(RuntimeError, match="draws random numbers"):
        model(torch.randn(8, device="rill"))
