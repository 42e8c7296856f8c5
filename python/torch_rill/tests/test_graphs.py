# SPDX-License-Identifier: MIT
"""Capture and replay on rill (torch.rill.RillGraph, torch.rill.graph,
torch.accelerator.Graph), modelled on PyTorch's CUDA graph tests (its
test/test_cuda.py, test_graph_*): results equal eager ones with new data in
the static inputs, streams forked and joined inside a capture, the capture
error modes, the graph's memory (static outputs, reuse inside the capture, frees
deferred past it), the DOT dump and the cost of a replay."""

import gc
import threading
import time

import pytest
import torch

import rill

from conftest import rill_stream


def _model_ops(x, w, b):
    """Native rill kernels only (docs/torch.md's table): addmm, relu, mul
    and add with a number, mm, softmax, sum."""
    h = torch.relu(torch.addmm(b, x, w))
    z = h * 2.0 + 1.0
    p = torch.softmax(z, dim=1)
    q = torch.mm(p, w.t())
    return z, p, q.sum(), q.sum(dim=0)


def test_captured_native_ops_replay_with_new_inputs_as_eager_runs_them():
    torch.manual_seed(0)
    x = torch.randn(16, 32).to("rill")
    w = torch.randn(32, 8).to("rill")
    b = torch.randn(8).to("rill")
    g = torch.rill.RillGraph()
    with torch.rill.graph(g):
        outs = _model_ops(x, w, b)
    for round in range(3):
        new_x, new_w, new_b = torch.randn(16, 32), torch.randn(32, 8), torch.randn(8)
        x.copy_(new_x)
        w.copy_(new_w)
        b.copy_(new_b)
        g.replay()
        expected = _model_ops(new_x, new_w, new_b)
        for got, want in zip(outs, expected):
            torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)


def test_capture_on_the_current_stream_with_a_stream_forked_and_joined_inside():
    """Seed 004's and torchair's pattern: s2.wait_stream(s1) forks s2 into
    s1's capture, s1.wait_stream(s2) joins it back."""
    s1, s2 = torch.rill.Stream(), torch.rill.Stream()
    x = torch.ones(4096, device="rill")
    g = torch.rill.RillGraph()
    torch.rill.synchronize()
    with torch.rill.stream(s1):
        g.capture_begin()
        assert torch.rill.is_current_stream_capturing()
        a = x * 2.0
        s2.wait_stream(s1)
        with torch.rill.stream(s2):
            assert torch.rill.is_current_stream_capturing()
            b = x + 3.0
        c = a * a
        s1.wait_stream(s2)
        d = c + b
        g.capture_end()
    assert not torch.rill.is_current_stream_capturing()
    for value in (1.0, -2.0, 5.0):
        x.fill_(value)
        g.replay()
        torch.testing.assert_close(d.cpu(), torch.full((4096,), 4 * value * value + value + 3))


def test_a_stream_forked_and_not_joined_fails_capture_end():
    s1, s2 = torch.rill.Stream(), torch.rill.Stream()
    x = torch.ones(64, device="rill")
    g = torch.rill.RillGraph()
    torch.rill.synchronize()
    with torch.rill.stream(s1):
        g.capture_begin()
        s2.wait_stream(s1)
        with torch.rill.stream(s2):
            x.mul_(2.0)
        with pytest.raises(RuntimeError, match="CAPTURE_UNJOINED"):
            g.capture_end()
    assert not torch.rill.is_current_stream_capturing()


def _unsafe_copy():
    """rill_memcpy on a stream that does not capture: an unsafe call."""
    s = torch.rill.Stream()
    with torch.rill.stream(s):
        return torch.ones(4).to("rill")


def _capture_with(mode, body):
    """Captures x * 2 then body(), in mode; returns the graph, x and the
    output, or raises capture_end's error."""
    x = torch.ones(8, device="rill")
    g = torch.rill.RillGraph()
    s = torch.rill.Stream()
    torch.rill.synchronize()
    with torch.rill.stream(s):
        g.capture_begin(capture_error_mode=mode)
        try:
            y = x * 2.0
            body()
        finally:
            g.capture_end()
    return g, x, y


def _in_other_thread(fn):
    box = []

    def run():
        try:
            box.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert not t.is_alive()
    return box[0]


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_sync_in_any_mode_names_the_op_and_fails_capture_end(mode):
    x = torch.ones(8, device="rill")
    g = torch.rill.RillGraph()
    s = torch.rill.Stream()
    torch.rill.synchronize()
    with torch.rill.stream(s):
        g.capture_begin(capture_error_mode=mode)
        y = (x * 2.0).sum()
        with pytest.raises(RuntimeError, match=r"Tensor\.item\(\).*captures a graph"):
            y.item()
        with pytest.raises(RuntimeError, match=r"copy_ to the CPU.*captures a graph"):
            y.cpu()
        with pytest.raises(RuntimeError, match="capture_end: .*CAPTURE_INVALIDATED"):
            g.capture_end()
        assert not torch.rill.is_current_stream_capturing()
        # The graph holds nothing, and captures again.
        with pytest.raises(RuntimeError, match="holds no capture"):
            g.replay()
        g.capture_begin(capture_error_mode=mode)
        y = (x * 3.0).sum()
        g.capture_end()
    g.replay()
    assert y.item() == 24.0


def test_global_mode_refuses_an_unsafe_call_from_another_thread():
    result = []
    with pytest.raises(RuntimeError, match="CAPTURE_INVALIDATED"):
        _capture_with("global", lambda: result.append(_in_other_thread(_unsafe_copy)))
    assert isinstance(result[0], RuntimeError)
    assert "CAPTURE_UNSUPPORTED" in str(result[0])


def test_thread_local_mode_lets_other_threads_but_not_its_own_make_unsafe_calls():
    result = []
    g, x, y = _capture_with("thread_local",
                            lambda: result.append(_in_other_thread(_unsafe_copy)))
    assert result[0].cpu().tolist() == [1.0] * 4
    g.replay()
    assert y.cpu().tolist() == [2.0] * 8
    with pytest.raises(RuntimeError, match="CAPTURE_INVALIDATED"):
        _capture_with("thread_local", lambda: pytest.raises(RuntimeError, _unsafe_copy))


def test_relaxed_mode_lets_the_capturing_thread_make_unsafe_calls():
    made = []
    g, x, y = _capture_with("relaxed", lambda: made.append(_unsafe_copy()))
    assert made[0].cpu().tolist() == [1.0] * 4
    g.replay()
    assert y.cpu().tolist() == [2.0] * 8


def test_an_unknown_capture_error_mode_is_refused():
    with pytest.raises(ValueError, match="capture_error_mode"):
        torch.rill.RillGraph().capture_begin(capture_error_mode="loose")


def test_static_outputs_keep_their_memory_after_the_graph_is_reset_and_deleted():
    x = torch.ones(1 << 16, device="rill")
    g = torch.rill.RillGraph()
    with torch.rill.graph(g):
        out = x * 2.0
    ptr = out.data_ptr()
    for value in (3.0, 4.0):
        x.fill_(value)
        g.replay()
        assert out.data_ptr() == ptr
        assert out[:4].cpu().tolist() == [2 * value] * 4
    g.reset()
    del g
    gc.collect()
    torch.rill.synchronize()
    others = [torch.full((1 << 16,), 7.0, device="rill") for _ in range(4)]
    assert all(o.data_ptr() != ptr for o in others)
    torch.rill.synchronize()
    assert out.cpu().eq(8.0).all()


def test_replay_after_reset_is_refused_and_a_reset_graph_captures_again():
    x = torch.ones(16, device="rill")
    g = torch.rill.RillGraph()
    with torch.rill.graph(g):
        y = x + 1.0
    g.replay()
    g.reset()
    with pytest.raises(RuntimeError, match="replay: this graph holds no capture"):
        g.replay()
    with torch.rill.graph(g):
        z = x * 5.0
    x.fill_(2.0)
    g.replay()
    assert z.cpu().tolist() == [10.0] * 16
    assert y.cpu().tolist() == [2.0] * 16  # the first capture's output, untouched since


def test_a_temporary_freed_inside_the_capture_is_reused_by_the_capture():
    x = torch.ones(1 << 14, device="rill")
    g = torch.rill.RillGraph()
    with torch.rill.graph(g):
        t = x * 2.0
        t_ptr = t.data_ptr()
        y = t + 1.0
        del t
        u = x * 3.0
        z = u + y
    assert u.data_ptr() == t_ptr
    x.fill_(2.0)
    g.replay()
    assert z[:3].cpu().tolist() == [11.0] * 3


def test_memory_freed_during_a_capture_is_not_handed_out_before_the_capture_ends():
    """A tensor from before the capture, used by it and dropped inside it:
    its free waits for the capture's end (a free of memory the capture uses
    would invalidate it, or, relaxed, hand the memory out under the graph).
    (Its replays would read freed memory, as with CUDA: static inputs must
    outlive the graph's replays.)"""
    torch.rill.synchronize()
    torch.rill.empty_cache()
    base = torch.rill.memory_allocated()
    n = 1 << 14
    for mode in ("global", "relaxed"):
        x = torch.ones(n, device="rill")
        old = torch.full((n,), 5.0, device="rill")
        old_ptr = old.data_ptr()
        g = torch.rill.RillGraph()
        s = torch.rill.Stream()
        torch.rill.synchronize()
        with torch.rill.stream(s):
            g.capture_begin(capture_error_mode=mode)
            y = x + old
            del old
            with torch.rill.stream(torch.rill.default_stream()):
                later = [torch.empty(n, device="rill") for _ in range(4)]
            g.capture_end()
        assert all(t.data_ptr() != old_ptr for t in later)
        del g, x, y, later
    gc.collect()
    torch.rill.synchronize()
    assert torch.rill.memory_allocated() == base


def test_memory_returns_to_its_base_after_the_graph_and_its_tensors_go():
    torch.rill.synchronize()
    torch.rill.empty_cache()
    base = torch.rill.memory_allocated()
    x = torch.ones(1 << 16, device="rill")
    g = torch.rill.RillGraph()
    with torch.rill.graph(g):
        y = (x * 2.0).sum()
    g.replay()
    assert torch.rill.memory_allocated() > base
    del g
    assert y.item() == 2.0 * (1 << 16)
    del x, y
    gc.collect()
    torch.rill.synchronize()
    assert torch.rill.memory_allocated() == base


def test_debug_dump_writes_the_graph_in_dot_naming_its_kernels(tmp_path):
    x = torch.ones(64, 64, device="rill")
    g = torch.rill.RillGraph()
    g.enable_debug_mode()
    with torch.rill.graph(g):
        torch.relu(x @ x)
    path = tmp_path / "graph.dot"
    g.debug_dump(str(path))
    text = path.read_text()
    assert text.lstrip().startswith("digraph")
    assert "matmul" in text and "map" in text
    g.replay()
    plain = torch.rill.RillGraph()
    with torch.rill.graph(plain):
        x + 1.0
    with pytest.raises(RuntimeError, match="enable_debug_mode"):
        plain.debug_dump(str(path))


def test_torch_accelerator_graph_captures_and_replays_on_rill():
    x = torch.ones(32, device="rill")
    s = torch.rill.Stream()
    g = torch.accelerator.Graph()
    with s, g:
        y = x * 4.0 + 1.0
    x.fill_(2.0)
    g.replay()
    assert y.cpu().tolist() == [9.0] * 32
    keep = torch.accelerator.Graph(keep_graph=True)
    with torch.rill.graph(keep):
        z = x - 1.0
    keep.replay()  # instantiated here
    assert z.cpu().tolist() == [1.0] * 32


def test_pool_handles_are_accepted_and_returned():
    a = torch.rill.graph_pool_handle()
    assert a != torch.rill.graph_pool_handle()
    x = torch.ones(8, device="rill")
    g1, g2 = torch.rill.RillGraph(), torch.rill.RillGraph()
    with torch.rill.graph(g1, pool=a):
        y1 = x * 2.0
    with torch.rill.graph(g2, pool=g1.pool()):
        y2 = y1 + 1.0
    assert g1.pool() == a and g2.pool() == a
    g3 = torch.rill.RillGraph()
    with torch.rill.graph(g3):
        x + 0.0
    assert g3.pool() not in (a, (0, 0))
    g1.replay()
    g2.replay()
    assert y2.cpu().tolist() == [3.0] * 8


def test_a_thousand_replays_cost_less_than_the_ops_run_eagerly():
    x = torch.ones(256, device="rill")

    def ops():
        y = x
        for _ in range(20):
            y = y * 1.0001 + 0.5
        return y

    g = torch.rill.RillGraph()
    with torch.rill.graph(g):
        out = ops()
    g.replay()
    torch.rill.synchronize()
    start = time.perf_counter()
    for _ in range(1000):
        g.replay()
    torch.rill.synchronize()
    replays = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(1000):
        ops()
    torch.rill.synchronize()
    eager = time.perf_counter() - start
    assert replays < eager, f"1000 replays took {replays:.3f} s, the ops eagerly {eager:.3f} s"
    torch.testing.assert_close(out.cpu(), ops().cpu())


def test_allocating_in_a_capture_begun_through_rill_itself_is_refused():
    """Its graph's memory could not be kept by the tensor: rill.Graph's
    capture is not one that torch_rill runs. The capture does not go on
    without the op that failed: its end fails."""
    s = torch.rill.Stream()
    g = rill.Graph()
    torch.rill.synchronize()
    with torch.rill.stream(s):
        g.capture_begin(stream=rill_stream(s))
        try:
            assert torch.rill.is_current_stream_capturing()
            with pytest.raises(RuntimeError, match="not begun by torch.rill.graph"):
                torch.empty(16, device="rill")
        finally:
            with pytest.raises(rill.CaptureInvalidatedError):
                g.capture_end()
    g.reset()


def test_reset_during_a_capture_discards_it_and_the_stream_works_on():
    x = torch.ones(8, device="rill")
    s = torch.rill.Stream()
    g = torch.rill.RillGraph()
    torch.rill.synchronize()
    with torch.rill.stream(s):
        g.capture_begin()
        x * 2.0
        g.reset()
        assert not torch.rill.is_current_stream_capturing()
        assert (x + 1.0).cpu().tolist() == [2.0] * 8
    with torch.rill.graph(g, stream=s):
        y = x * 3.0
    with pytest.raises(RuntimeError, match="holds a capture already"):
        g.capture_begin()
    g.replay()
    assert y.cpu().tolist() == [3.0] * 8


def test_a_kept_graph_is_instantiated_on_demand_and_dumped(tmp_path):
    x = torch.ones(8, device="rill")
    g = torch.rill.RillGraph(keep_graph=True)
    with torch.rill.graph(g):
        y = x * 3.0
    g.instantiate()
    g.replay()
    assert y.cpu().tolist() == [3.0] * 8
    assert g.pool() != (0, 0)
    g.debug_dump(str(tmp_path / "kept.dot"))
    assert "map_f32" in (tmp_path / "kept.dot").read_text()


def test_a_captured_training_step_replays_as_eager_steps_do():
    """PyTorch's whole-network capture: forward, loss, backward and an SGD
    step captured once, replayed on new data copied into the static
    inputs, give the losses and parameters of the same steps run eagerly."""
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).to("rill")
    graphed = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                  torch.nn.Linear(32, 4)).to("rill")
    graphed.load_state_dict(eager.state_dict())
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_g = torch.optim.SGD(graphed.parameters(), lr=0.1)
    data = [(torch.randn(8, 16, device="rill"), torch.randn(8, 4, device="rill"))
            for _ in range(5)]

    def eager_step(x, y):
        opt_e.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(eager(x), y)
        loss.backward()
        opt_e.step()
        return loss

    static_x, static_y = data[0][0].clone(), data[0][1].clone()
    side = torch.rill.Stream()  # warm up on a side stream, as CUDA graphs ask
    side.wait_stream(torch.rill.current_stream())
    with torch.rill.stream(side):
        opt_g.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(graphed(static_x), static_y).backward()
        opt_g.step()
    torch.rill.current_stream().wait_stream(side)
    eager_step(*data[0])

    g = torch.rill.RillGraph()
    opt_g.zero_grad(set_to_none=True)
    with torch.rill.graph(g):
        static_loss = torch.nn.functional.mse_loss(graphed(static_x), static_y)
        static_loss.backward()
        opt_g.step()
    for x, y in data[1:]:
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        loss = eager_step(x, y)
        assert abs(static_loss.item() - loss.item()) <= 1e-5 * max(1.0, abs(loss.item()))
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        torch.testing.assert_close(pg.cpu(), pe.cpu(), rtol=1e-5, atol=1e-5)
