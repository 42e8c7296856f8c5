# SPDX-License-Identifier: MIT
"""The small MLP and CNN of examples/python, written for PyTorch, run with
their imports changed to rill.compat.torch, against Debian's PyTorch (CPU)
running the same file unchanged otherwise: with the weights copied from
torch's model, every output equals torch's within float32 tolerance. And
the tensor basics the models rest on, each against torch; and a torch call
rill lacks is a NotImplementedError naming it and the way to PyTorch."""

import os
import types

import numpy as np
import pytest

import rill.compat.torch as rtorch
import rill.compat.torch.nn.functional as RF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "python")
RILL_IMPORTS = ("import rill.compat.torch as torch\n", "import rill.compat.torch.nn as nn\n",
                "import rill.compat.torch.nn.functional as F\n")
TORCH_IMPORTS = ("import torch\n", "import torch.nn as nn\n", "import torch.nn.functional as F\n")


def load(name, real):
    """examples/python/<name>.py as a module, with PyTorch's imports when
    real: the only change between the two."""
    with open(os.path.join(EXAMPLES, name + ".py")) as f:
        source = f.read()
    for ours, theirs in zip(RILL_IMPORTS, TORCH_IMPORTS):
        assert ours in source, f"{name}.py should import {ours.strip()}"
        if real:
            source = source.replace(ours, theirs)
    module = types.ModuleType(f"{name}_{'torch' if real else 'rill'}")
    exec(compile(source, name + ".py", "exec"), module.__dict__)
    return module


def close(got, want, atol=1e-5, rtol=1e-5):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=atol, rtol=rtol)


def twins(name, cls):
    ours, theirs = load(name, False), load(name, True)
    torch.manual_seed(0)
    model_t = getattr(theirs, cls)()
    model_r = getattr(ours, cls)()
    model_r.load_state_dict(model_t.state_dict())
    return ours, theirs, model_r, model_t


def test_mlp_matches_pytorch():
    ours, theirs, model_r, model_t = twins("mlp", "MLP")
    got, want = ours.run(model_r), theirs.run(model_t)
    for g, w in zip(got, want):
        close(g, w)


def test_cnn_matches_pytorch():
    ours, theirs, model_r, model_t = twins("cnn", "CNN")
    got, want = ours.run(model_r), theirs.run(model_t)
    for g, w in zip(got, want):
        close(g, w, atol=2e-5)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_examples_run_as_scripts(name, capsys):
    load(name, False).main()
    assert capsys.readouterr().out.count("\n") >= 2


def pair(*shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return rtorch.from_numpy(a), torch.from_numpy(a)


def test_indexing_slicing_and_views_match_pytorch():
    r, t = pair(4, 6, 5)
    for index in [1, -1, (slice(1, 3),), (slice(None), 2), (Ellipsis, 1), (slice(None, None, 2),),
                  (1, slice(1, 5, 2), None), (None, Ellipsis)]:
        close(r[index], t[index])
    close(r.transpose(0, 2), t.transpose(0, 2))
    close(r.permute(2, 0, 1).reshape(5, -1), t.permute(2, 0, 1).reshape(5, -1))
    close(r.view(24, 5), t.view(24, 5))
    close(r.unsqueeze(1).squeeze(1), t.unsqueeze(1).squeeze(1))
    close(r.flatten(1), t.flatten(1))
    close(r[:, :1].expand(4, 3, 5), t[:, :1].expand(4, 3, 5))
    close(r[0].t(), t[0].t())
    # torch's views share the memory: so do rill's.
    v = r[1]
    r[1] = 7.0
    close(v, np.full((6, 5), 7.0, np.float32))
    r[:, 2] = rtorch.ones(5)
    t[1] = 7.0
    t[:, 2] = torch.ones(5)
    close(r, t)
    assert r.view(-1).is_contiguous() and not r.transpose(0, 1).is_contiguous()


def test_broadcasting_arithmetic_matches_pytorch():
    ra, ta = pair(3, 1, 5)
    rb, tb = pair(4, 1, seed=1)
    close(ra + rb, ta + tb)
    close(ra - rb, ta - tb)
    close(ra * rb, ta * tb)
    close(ra / rb, ta / tb)
    close(2.0 / (rb.abs() + 1), 2.0 / (tb.abs() + 1))
    close(ra ** 2, ta ** 2)
    close(ra.transpose(0, 2) - 1.5, ta.transpose(0, 2) - 1.5)
    close(rtorch.maximum(ra, rb), torch.maximum(ta, tb))
    close(ra.clamp(-0.5, 0.5), ta.clamp(-0.5, 0.5))


def test_log_softmax_matches_pytorch_at_every_magnitude():
    rows = [[x, x] for x in (0.0, 1e3, 1e5, -1e5, 1e8, 3e38)]
    rows += [[1e5, 1e5 - 1, 1e5 - 3.5, 1e5 + 0.5], [1e-30, -1e-30, 0.0, 1e-7],
             [1e8, 0.0, -1e8, 1.0], [-3e38, 3e38, 1.0, 0.0]]
    for row in rows:
        t = torch.tensor([row], dtype=torch.float32)
        r = rtorch.tensor([row], dtype=rtorch.float32)
        np.testing.assert_array_equal(RF.log_softmax(r, dim=1).numpy(),
                                      TF.log_softmax(t, dim=1).numpy(), err_msg=str(row))


@pytest.mark.parametrize("fn", ["relu", "gelu", "sigmoid", "tanh", "silu", "leaky_relu"])
def test_activations_match_pytorch(fn):
    r, t = pair(7, 33)
    close(getattr(RF, fn)(r), getattr(TF, fn)(t), atol=1e-6)


def test_softmax_and_reductions_match_pytorch():
    r, t = pair(3, 4, 5)
    for d in (0, 1, 2, -1):
        close(RF.softmax(r, dim=d), TF.softmax(t, dim=d), atol=1e-6)
        close(RF.log_softmax(r, dim=d), TF.log_softmax(t, dim=d), atol=1e-5)
        for keepdim in (False, True):
            close(r.sum(d, keepdim=keepdim), t.sum(d, keepdim=keepdim))
            close(r.mean(d, keepdim=keepdim), t.mean(d, keepdim=keepdim))
            values, indices = r.max(d, keepdim=keepdim)
            want = t.max(d, keepdim=keepdim)
            close(values, want.values)
            assert indices.dtype.name == "int64"
            np.testing.assert_array_equal(indices.numpy(), want.indices.numpy())
    close(r.sum(), t.sum())
    close(r.mean((1, 2)), t.mean((1, 2)))
    close(r.max(), t.max())
    np.testing.assert_array_equal(r.argmax(1).numpy(), t.argmax(1).numpy())


def test_cat_and_stack_match_pytorch():
    ra, ta = pair(2, 3, 4)
    rb, tb = pair(2, 1, 4, seed=1)
    close(rtorch.cat([ra, rb, ra], dim=1), torch.cat([ta, tb, ta], dim=1))
    close(rtorch.cat([ra, ra], dim=-1), torch.cat([ta, ta], dim=-1))
    close(rtorch.stack([ra, ra * 2], dim=1), torch.stack([ta, ta * 2], dim=1))


@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 1), (1, 2), ((2, 1), (0, 1))])
def test_conv2d_and_pooling_match_pytorch(stride, padding):
    rx, tx = pair(2, 3, 11, 9)
    rw, tw = pair(4, 3, 3, 3, seed=1)
    rb, tb = pair(4, seed=2)
    close(RF.conv2d(rx, rw, rb, stride=stride, padding=padding),
          TF.conv2d(tx, tw, tb, stride=stride, padding=padding), atol=1e-5)
    close(RF.max_pool2d(rx, 3, stride=stride, padding=1),
          TF.max_pool2d(tx, 3, stride=stride, padding=1))
    close(RF.avg_pool2d(rx, 2, stride=stride), TF.avg_pool2d(tx, 2, stride=stride))


def test_float64_input_is_converted_to_float32():
    a = np.random.default_rng(3).standard_normal((3, 4))
    r = rtorch.from_numpy(a)
    assert r.dtype is rtorch.float32 and rtorch.tensor(a).dtype is rtorch.float32
    assert rtorch.tensor(a, dtype=rtorch.float64).dtype is rtorch.float32
    close(r.double() * 2, torch.from_numpy(a).float() * 2)


def test_a_missing_torch_call_is_not_implemented_with_the_way_out():
    r, _ = pair(2, 2)
    for call in (lambda: rtorch.fft, lambda: r.backward(), lambda: RF.embedding,
                 lambda: rtorch.nn.LSTM, lambda: r[[0, 1]]):
        with pytest.raises(NotImplementedError) as err:
            call()
        assert "from_dlpack" in str(err.value)
    assert not hasattr(r, "backward") and not hasattr(rtorch, "fft")
    with pytest.raises(AttributeError):
        rtorch.__no_such_dunder__
