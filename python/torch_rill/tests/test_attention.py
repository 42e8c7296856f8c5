# SPDX-License-Identifier: MIT
"""scaled_dot_product_attention on rill: PyTorch chooses the overrideable
backend for float32 attention, which runs as rill's kernels (one batched
product per matrix product, softmax, the mask added), with the results of
PyTorch's own CPU attention: a transformer encoder's inference and training
step, causal and additive masks, a key padding mask, a fully masked row,
which comes out 0, and the logsumexp the fused op returns. bmm reads
strided batches in place."""

import textwrap

import pytest
import torch

from conftest import traced_names
import torch.nn.functional as F
from torch import nn

TOL = 1e-5


def close(got, want, tol=TOL):
    assert got.device.type == "rill"
    got = got.detach().cpu()
    want = want.detach()
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=tol, atol=tol, equal_nan=True), \
        (got - want).abs().max().item()


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def layer(seed=0):
    torch.manual_seed(seed)
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)


def test_sdpa_chooses_the_overrideable_backend():
    """Float32 attention on rill takes the overrideable backend (before:
    0, PyTorch's math path, whose _safe_softmax and scalings ran PyTorch's
    CPU kernels in host functions); float64 stays on the math path."""
    q = randn(2, 4, 8, 16).to("rill")
    assert torch._fused_sdp_choice(q, q, q) == 4  # SDPBackend.OVERRIDEABLE
    assert torch._fused_sdp_choice(q.double(), q.double(), q.double()) == 0
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        assert torch._fused_sdp_choice(q, q, q) == 0


def attention_case(mask=None, is_causal=False, strided=True, lk=8):
    """q, k, v as nn.MultiheadAttention lays out its heads (a transposed
    view of one projection), on the CPU and on rill; out and the gradients
    of both."""
    b, h, lq, e = 3, 4, 8, 16
    results = []
    for dev in ("cpu", "rill"):
        qkv = randn(lq + 2 * lk, b, h * e, seed=1).to(dev).requires_grad_()
        x = qkv.view(lq + 2 * lk, b, h, e).permute(1, 2, 0, 3) if strided else \
            qkv.view(b, h, lq + 2 * lk, e)
        q, k, v = x[:, :, :lq], x[:, :, lq:lq + lk], x[:, :, lq + lk:]
        m = mask.detach().to(dev).requires_grad_(mask.is_floating_point()) if mask is not None else None
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=is_causal)
        (out * randn(*out.shape, seed=2).to(dev)).sum().backward()
        results.append((out, qkv.grad, m.grad if m is not None and m.requires_grad else None))
    return results


@pytest.mark.parametrize("strided", [True, False])
def test_attention_matches_the_cpu(strided):
    (want, want_g, _), (got, got_g, _) = attention_case(strided=strided)
    close(got, want)
    close(got_g, want_g)


def test_causal_attention_matches_the_cpu():
    (want, want_g, _), (got, got_g, _) = attention_case(is_causal=True)
    close(got, want)
    close(got_g, want_g)


def test_additive_mask_and_its_gradient_match_the_cpu():
    """A float mask [L, S] broadcast over batch and heads, with some -inf;
    its gradient is summed back to its shape."""
    mask = randn(8, 8, seed=3)
    mask[2, 5] = float("-inf")
    (want, want_g, want_m), (got, got_g, got_m) = attention_case(mask=mask)
    close(got, want)
    close(got_g, want_g)
    close(got_m, want_m)


def test_fully_masked_row_is_zero():
    """A row whose keys are all masked (-inf, or False in a bool mask) gives
    0, as PyTorch's CPU attention gives (softmax alone gives NaN), and no
    gradient; the other rows are the CPU's."""
    mask = torch.zeros(3, 1, 8, 8)
    mask[1, 0, 4] = float("-inf")
    (want, want_g, _), (got, got_g, _) = attention_case(mask=mask)
    assert torch.count_nonzero(want[1, :, 4]) == 0
    close(got, want)
    close(got_g, want_g)
    keep = torch.ones(8, 8, dtype=torch.bool)
    keep[6] = False
    (want, want_g, _), (got, got_g, _) = attention_case(mask=keep)
    assert torch.count_nonzero(got[:, :, 6].cpu()) == 0
    close(got, want)
    close(got_g, want_g)


@pytest.mark.parametrize("case", ["none", "additive", "causal", "fully masked", "no keys"])
def test_fused_op_returns_the_logsumexp_of_the_scores(case):
    """The overrideable op's second result is each row's logsumexp of the
    scaled and masked scores, [B, H, L] as PyTorch's meta function gives it
    (before: an empty tensor); a fully masked row's is -inf."""
    q, k, v = randn(2, 3, 5, 8, seed=4), randn(2, 3, 7, 8, seed=5), randn(2, 3, 7, 4, seed=6)
    mask, causal = None, case == "causal"
    if case == "no keys":
        k, v = k[:, :, :0], v[:, :, :0]
    if case in ("additive", "fully masked"):
        mask = randn(5, 7, seed=7)
        mask[1, 3] = float("-inf")
        if case == "fully masked":
            mask[2] = float("-inf")
    scores = q @ k.transpose(-2, -1) / 8 ** 0.5
    if mask is not None:
        scores = scores + mask
    if causal:
        scores = scores.masked_fill(torch.ones(5, 7, dtype=torch.bool).triu(1), float("-inf"))
    want = torch.logsumexp(scores, -1)
    dev = [t.to("rill") for t in (q, k, v)]
    got = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        *dev, None if mask is None else mask.to("rill"), is_causal=causal)
    assert got[1].shape == (2, 3, 5) and got[1].dtype == torch.float32
    close(got[1], want)
    if case == "fully masked":
        assert torch.isneginf(got[1][:, :, 2].cpu()).all()
    if case != "no keys":
        close(got[0], F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal))


def test_encoder_layer_inference_matches_the_cpu():
    cpu = layer().eval()
    dev = layer().eval().to("rill")
    x = randn(4, 16, 32, seed=4)
    with torch.no_grad():
        close(dev(x.to("rill")), cpu(x))


@pytest.mark.parametrize("masking", ["causal", "float", "padding"])
def test_encoder_layer_with_masks_matches_the_cpu(masking):
    """The layer's own masks: a causal src_mask (is_causal=True), an
    additive float mask, and a bool key padding mask that pads one sequence
    whole (its rows fully masked)."""
    x = randn(4, 16, 32, seed=5)
    args = {}
    if masking == "causal":
        args = {"src_mask": nn.Transformer.generate_square_subsequent_mask(16), "is_causal": True}
    elif masking == "float":
        args = {"src_mask": randn(16, 16, seed=6)}
    else:
        pad = torch.zeros(4, 16, dtype=torch.bool)
        pad[1, 10:] = True
        pad[2, :] = True
        args = {"src_key_padding_mask": pad}
    outs = []
    for dev in ("cpu", "rill"):
        model = layer().to(dev)
        y = model(x.to(dev), **{k: v.to(dev) if torch.is_tensor(v) else v
                                for k, v in args.items()})
        y.sum().backward()
        outs.append((y, [p.grad for p in model.parameters()]))
    (want, want_g), (got, got_g) = outs
    close(got, want)
    for g, w in zip(got_g, want_g):
        close(g, w)


def test_encoder_training_step_matches_the_cpu():
    """Embedding, two encoder layers and a classifier: one SGD step gives
    the CPU's loss and parameters."""
    def model():
        torch.manual_seed(0)
        enc = nn.TransformerEncoder(layer(), 2, enable_nested_tensor=False)
        return nn.ModuleDict({"embed": nn.Embedding(100, 32), "enc": enc,
                              "out": nn.Linear(32, 10)})
    tokens = torch.randint(0, 100, (4, 16), generator=torch.Generator().manual_seed(7))
    y = torch.randint(0, 10, (4,), generator=torch.Generator().manual_seed(8))
    results = []
    for dev in ("cpu", "rill"):
        m = model().to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        loss = F.cross_entropy(m["out"](m["enc"](m["embed"](tokens.to(dev))).mean(1)), y.to(dev))
        loss.backward()
        opt.step()
        results.append((loss, list(m.parameters())))
    (want_loss, want_p), (got_loss, got_p) = results
    close(got_loss, want_loss)
    for g, w in zip(got_p, want_p):
        close(g, w)


@pytest.mark.parametrize("case", ["transposed", "sliced", "expanded", "transposed_both"])
def test_bmm_reads_strided_batches(case):
    a, b = randn(5, 7, 9, seed=9), randn(5, 9, 6, seed=10)
    if case == "transposed":
        a = randn(5, 9, 7, seed=9).transpose(1, 2)
    elif case == "sliced":
        a = randn(5, 7, 20, seed=9)[:, :, 3:12]
    elif case == "expanded":
        b = randn(1, 9, 6, seed=10).expand(5, 9, 6)
    else:
        a, b = randn(7, 5, 9, seed=9).transpose(0, 1), randn(5, 6, 9, seed=10).transpose(1, 2)
    close(torch.bmm(a.to("rill"), b.to("rill")), torch.bmm(a, b))


def test_trace_shows_attention_kernels_and_no_host_function(tmp_path):
    """Two encoder layers (as nn.TransformerEncoder runs them, unfused)
    forward in evaluation and forward and backward in training: the attention runs as
    rill's kernels (the batched product among them) and no host function
    runs a PyTorch CPU kernel for it (before: aten::mul, aten::isneginf,
    aten::all and aten::where of the math path's scalings and
    _safe_softmax)."""
    code = textwrap.dedent("""
        import torch, torch_rill
        from torch import nn
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to("rill")
        x = torch.randn(2, 8, 32, device="rill", requires_grad=True)
        enc.eval()(x)  # with x's gradient on: not the fused fast path
        enc.train()(x).sum().backward()
        torch.rill.synchronize()
    """)
    names = sorted(traced_names(tmp_path, code))
    hosts = [n for n in names if n.endswith("(host function)")
             and not n.startswith("aten::zero_ ")]  # autograd's zeros: not the attention's
    assert not hosts, hosts
    # Trace names are cut at 63 characters: the batched product's is
    # "matmul_" here, its only matrix product.
    for op in ("aten::_scaled_dot_product_fused_attention_overrideable (matmul_",
               "aten::_scaled_dot_product_fused_attention_overrideable (softmax",
               "aten::_scaled_dot_product_fused_attention_overrideable_backwa"):
        assert any(n.startswith(op) for n in names), names
