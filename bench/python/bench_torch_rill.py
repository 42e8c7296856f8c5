# SPDX-License-Identifier: MIT
"""PyTorch on rill (torch_rill) against PyTorch's own `cpu` device, measured
alternately in one run: `a + b` on 1-element and 1M-element tensors, `mm`
1024², `relu`, `gelu` (erf and tanh forms), `sigmoid` and `exp` of 1M
elements, softmax of 16x4x64x64 over the last dimension (an attention's
scores), the sum of 1024x1024 over its last dimension, an MLP 784-256-256-10
at batch 32 (inference, one SGD step, one Adam step), an MLP 64-128-128-10
at batch 8 whose inference rill replays from a torch.accelerator.Graph (against
PyTorch's eager `cpu` forward), conv2d of 8x128x56x56 by 128 3x3 filters
(padding 1), the backward of conv2d of 8x64x56x56 by 64 3x3 filters (padding
1; the input, weight and bias gradients), ResNet-18 at batch 8 (224x224,
inference, and one SGD step in training mode, also channels-last), a small
transformer encoder (inference, and one SGD step; also with dropout 0.1),
rill's stream calls from PyTorch (torch.Event record + wait_event + query;
entering and leaving `with torch.rill.stream(s)`), and two independent
chains of 200 dependent 64x64 matmuls (too small to fill the device alone:
one block each) queued on two rill streams against both on one stream (its
ratio is the one-stream time over the two-stream time). PyTorch's CPU device
runs with as many threads as rill's device has compute units. Each figure is
the median of REPEATS timed runs; a ratio compares medians of this run.

    RILL_LIBRARY=build/default/librill.so PYTHONPATH=python:python/torch_rill \\
        TORCH_RILL_EXTENSION=build/default/python/torch_rill/_C.cpython-311-x86_64-linux-gnu.so \\
        ~/.cache/rill/torch-2.15/bin/python bench/python/bench_torch_rill.py [--repeats 15] \\
        [--only conv2d --only resnet,"a + b"]

Not a test: it prints a table and judges nothing."""

import argparse
import statistics
import time

import torch
from torch import nn

import rill
import torch_rill  # noqa: F401


def seconds(fn, n, device):
    """Seconds per call of fn, over n calls, the device drained after."""
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    if device == "rill":
        torch.rill.synchronize()
    return (time.perf_counter() - t0) / n


def alternate(cases, n, repeats):
    """Median seconds per call of each (name, fn, device), the cases taking
    turns within each repeat so that both see the same machine."""
    times = {name: [] for name, _, _ in cases}
    for name, fn, device in cases:
        seconds(fn, max(1, n // 10), device)  # warm up
    for _ in range(repeats):
        for name, fn, device in cases:
            times[name].append(seconds(fn, n, device))
    return {name: statistics.median(t) for name, t in times.items()}


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def model_cases(device, optimizer=torch.optim.SGD):
    model = mlp().to(device)
    x = torch.randn(32, 784, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    opt = optimizer(model.parameters(), lr=0.01)

    def infer():
        with torch.no_grad():
            model(x)

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return infer, step


def small_mlp_case(device):
    """The inference of an MLP 64-128-128-10 at batch 8: on rill, a replay of
    its capture (every op of it is a rill kernel); on the CPU, eager."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 10)).to(device)
    x = torch.randn(8, 64, device=device)
    if device != "rill":
        def infer():
            with torch.no_grad():
                model(x)
        return infer
    g = torch.accelerator.Graph()
    with torch.no_grad(), torch.rill.graph(g):
        model(x)
    return g.replay


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with batch norm, and the shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


def resnet18(classes=1000):
    """torchvision's resnet18, built here (torchvision is not a dependency)."""
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


class Encoder(nn.Module):
    """Embedding, two transformer encoder layers (d_model 128, 4 heads) and a
    classifier; causal: each position attends to those before it, under the
    mask nn.Transformer makes (a language model's)."""

    def __init__(self, dropout=0.0, causal=False):
        super().__init__()
        torch.manual_seed(0)
        self.causal = causal
        self.embed = nn.Embedding(1000, 128)
        layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(128, 10)

    def forward(self, tokens):
        if not self.causal:
            return self.out(self.encoder(self.embed(tokens)).mean(1))
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1],
                                                              device=tokens.device)
        return self.out(self.encoder(self.embed(tokens), mask=mask, is_causal=True).mean(1))


def resnet_case(dev):
    model = resnet18().eval().to(dev)
    x = torch.randn(8, 3, 224, 224, generator=torch.Generator().manual_seed(1)).to(dev)

    def infer():
        with torch.no_grad():
            model(x)
    return infer


def resnet_step_case(dev, memory_format=torch.contiguous_format):
    """One SGD step of ResNet-18 in training mode (batch norm's batch
    statistics): forward, cross entropy, backward, update; the model and
    input in memory_format."""
    model = resnet18().train().to(dev, memory_format=memory_format)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 3, 224, 224, generator=g).to(dev, memory_format=memory_format)
    y = torch.randint(0, 1000, (8,), generator=g).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def encoder_cases(dev, dropout=0.0, causal=False):
    model = Encoder(dropout, causal).to(dev)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 1000, (16, 64), generator=g).to(dev)
    y = torch.randint(0, 10, (16,), generator=g).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def infer():
        with torch.no_grad():
            model(tokens)

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(model(tokens), y).backward()
        opt.step()
    return infer, step


CHAIN = 200  # matmuls in each chain of the two-stream figure


def overlap_cases(chain=CHAIN):
    """Two independent chains of `chain` dependent 64x64 matmuls (x = x @ w,
    w orthogonal so that the values stay as they are), queued both on the
    current stream, or each on a stream of its own forked from the current
    one and joined back; each call ends with a synchronize. The third
    function returns the median seconds the two-stream calls took to queue
    their work (before the synchronize): while the host queues one mm no
    slower than a worker runs one, a single worker keeps up with both
    chains and a second stream gains nothing."""
    q, _ = torch.linalg.qr(torch.randn(64, 64, generator=torch.Generator().manual_seed(0)))
    w = q.contiguous().to("rill")  # qr's Q is column-major: a strided w would copy per mm
    starts = [torch.randn(64, 64, device="rill") for _ in range(2)]
    side = [torch.rill.Stream(), torch.rill.Stream()]

    def run(x):
        for _ in range(chain):
            x = torch.mm(x, w)
        return x

    def one_stream():
        for x in starts:
            run(x)
        torch.rill.synchronize()

    queued = []

    def two_streams():
        t0 = time.perf_counter()
        cur = torch.rill.current_stream()
        for x, s in zip(starts, side):
            s.wait_stream(cur)
            with torch.rill.stream(s):
                run(x)
        for s in side:
            cur.wait_stream(s)
        queued.append(time.perf_counter() - t0)
        torch.rill.synchronize()
    return one_stream, two_streams, lambda: statistics.median(queued)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="few calls: checks that it runs")
    ap.add_argument("--only", action="append", default=[],
                    help="only the figures whose label contains one of these comma-separated "
                    "parts (repeatable)")
    args = ap.parse_args()
    scale = 0.05 if args.quick else 1.0
    torch.set_num_threads(rill.device(0).compute_units)

    rows = []

    def wanted(label):
        parts = [p for o in args.only for p in o.split(",") if p]
        return not parts or any(p.lower() in label.lower() for p in parts)

    def pair(label, make, n):
        if not wanted(label):
            return
        fns = {dev: make(dev) for dev in ("cpu", "rill")}
        got = alternate([(dev, fns[dev], dev) for dev in ("cpu", "rill")],
                        max(1, int(n * scale)), args.repeats)
        rows.append((label, got["rill"], got["cpu"]))

    def add_case(dev):
        a, b = torch.ones(1, device=dev), torch.ones(1, device=dev)
        return lambda: a + b
    pair("a + b, 1 element", add_case, 20000)

    def add_1m_case(dev):
        a, b = torch.randn(1 << 20, device=dev), torch.randn(1 << 20, device=dev)
        return lambda: a + b
    pair("a + b, 1M elements", add_1m_case, 100)

    def mm_case(dev):
        a = torch.randn(1024, 1024, device=dev)
        return lambda: a @ a
    pair("mm 1024x1024", mm_case, 10)

    def relu_case(dev):
        a = torch.randn(1 << 20, device=dev)
        return lambda: torch.relu(a)
    pair("relu, 1M elements", relu_case, 100)

    def unary_case(fn):
        def make(dev):
            a = torch.randn(1 << 20, device=dev)
            return lambda: fn(a)
        return make
    for label, fn in (("gelu, 1M elements", nn.functional.gelu),
                      ("gelu tanh, 1M elements",
                       lambda a: nn.functional.gelu(a, approximate="tanh")),
                      ("sigmoid, 1M elements", torch.sigmoid),
                      ("exp, 1M elements", torch.exp)):
        pair(label, unary_case(fn), 100)

    def softmax_case(dev):
        a = torch.randn(16, 4, 64, 64, device=dev)
        return lambda: torch.softmax(a, -1)
    pair("softmax 16x4x64x64, last dim", softmax_case, 100)

    def pixel_loss_case(dev):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(8, 21, 64, 64, generator=g).to(dev).requires_grad_()
        y = torch.randint(0, 21, (8, 64, 64), generator=g)
        y[:, :4] = 255  # an ignored band, as segmentation labels have
        y = y.to(dev)

        def run():
            nn.functional.cross_entropy(x, y, ignore_index=255).backward()
            x.grad = None
        return run
    pair("cross entropy per pixel 8x21x64x64, fwd+bwd", pixel_loss_case, 20)

    def sum_rows_case(dev):
        a = torch.randn(1024, 1024, device=dev)
        return lambda: a.sum(-1)
    pair("sum 1024x1024 over the last dim", sum_rows_case, 100)
    pair("MLP 784-256-256-10, batch 32, inference", lambda dev: model_cases(dev)[0], 200)
    pair("MLP 784-256-256-10, batch 32, SGD step", lambda dev: model_cases(dev)[1], 100)
    pair("MLP 784-256-256-10, batch 32, Adam step",
         lambda dev: model_cases(dev, torch.optim.Adam)[1], 100)
    pair("MLP 64-128-128-10, batch 8, graph replay", small_mlp_case, 2000)

    def conv_case(dev):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(8, 128, 56, 56, generator=g).to(dev)
        conv = nn.Conv2d(128, 128, 3, padding=1).to(dev)

        def run():
            with torch.no_grad():
                conv(x)
        return run
    pair("conv2d 8x128x56x56, 128 3x3, pad 1", conv_case, 2)

    def conv_backward_case(dev):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(8, 64, 56, 56, generator=g).to(dev)
        w = torch.randn(64, 64, 3, 3, generator=g).to(dev)
        grad = torch.randn(8, 64, 56, 56, generator=g).to(dev)
        args = ([64], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True])
        return lambda: torch.ops.aten.convolution_backward(grad, x, w, *args)
    pair("conv2d backward 8x64x56x56, 64 3x3, pad 1", conv_backward_case, 2)
    pair("ResNet-18, batch 8, 224x224, inference", resnet_case, 1)
    pair("ResNet-18, batch 8, 224x224, SGD step", resnet_step_case, 1)
    pair("ResNet-18, batch 8, 224x224, SGD step, channels-last",
         lambda dev: resnet_step_case(dev, torch.channels_last), 1)
    pair("encoder 2x128, batch 16x64, inference", lambda dev: encoder_cases(dev)[0], 5)
    pair("encoder 2x128, batch 16x64, SGD step", lambda dev: encoder_cases(dev)[1], 2)
    pair("encoder 2x128, 16x64, dropout 0.1, SGD step",
         lambda dev: encoder_cases(dev, 0.1)[1], 2)
    pair("causal encoder 2x128 16x64, dropout 0.1, SGD",
         lambda dev: encoder_cases(dev, 0.1, causal=True)[1], 2)

    s = torch.rill.Stream()
    e = torch.Event(device="rill")
    other = torch.rill.Stream()

    def event_hop():
        e.record(s)
        other.wait_event(e)
        e.query()

    def stream_scope():
        with torch.rill.stream(s):
            pass
    n = max(1, int(20000 * scale))
    for label, fn in (("torch.Event record + wait_event + query", event_hop),
                      ("with torch.rill.stream(s): (enter and leave)", stream_scope)):
        if not wanted(label):
            continue
        got = alternate([(label, fn, "rill")], n, args.repeats)
        rows.append((label, got[label], None))

    overlap = None
    label = f"2 chains of {CHAIN} mm 64x64, 2 streams over 1"
    if wanted(label):
        one, two, queued = overlap_cases()
        got = alternate([("one", one, "rill"), ("two", two, "rill")], max(1, int(20 * scale)),
                        args.repeats)
        rows.append((label, got["two"], None, got["one"] / got["two"]))
        overlap = dict(got, queued=queued())

    print(f"torch {torch.__version__}, rill device: {torch.rill.get_device_name()}, "
          f"{torch.get_num_threads()} CPU threads, medians of {args.repeats}")
    print(f"| {'figure':<46} | {'rill, us':>11} | {'cpu, us':>11} | {'rill/cpu':>8} |")
    print(f"|{'-' * 48}|{'-' * 13}|{'-' * 13}|{'-' * 10}|")
    for label, rill_s, cpu_s, *speedup in rows:
        cpu = f"{cpu_s * 1e6:11.1f}" if cpu_s else f"{'':>11}"
        ratio = f"{rill_s / cpu_s:7.2f}x" if cpu_s else f"{'':>8}"
        if speedup:
            ratio = f"{speedup[0]:7.2f}x"
        print(f"| {label:<46} | {rill_s * 1e6:11.1f} | {cpu} | {ratio} |")
    if overlap:
        per_mm = overlap["queued"] * 1e6 / (2 * CHAIN)
        print(f"2 streams over 1: the row's time is the two streams', its ratio one stream's "
              f"time ({overlap['one'] * 1e6:.1f} us) over it (the target: 1.6x or more on 2 "
              f"compute units); the host took {per_mm:.1f} us to queue each of the "
              f"{2 * CHAIN} mm")


if __name__ == "__main__":
    main()
