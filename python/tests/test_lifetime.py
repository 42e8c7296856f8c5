# SPDX-License-Identifier: MIT
"""Garbage collection of tensors that another stream still uses never frees
their memory early: the pattern check of tests/stress/test_stress_memory.c,
from Python, written as MindSpore code is (no record_stream).

Each round makes tensors on random streams, each filled with a value of its
own, makes other streams read them behind a gate (a host function that
holds the reading stream), drops the tensors (garbage: freed in stream
order on their own stream), allocates and writes more tensors of the same
sizes on every stream, then opens the gates: every read must still see the
value of the tensor it read, and every new tensor its own value. Seeded by
RILL_STRESS_SEED (default below); a failure names the seed and round."""

import gc
import os
import random

import numpy as np

import rill

SEED = int(os.environ.get("RILL_STRESS_SEED", "20251123"))
ROUNDS = 60
STREAMS = 4


def _size(rng):
    # both pools: small blocks (up to 1 MiB) and large ones
    return rng.choice([1, 7, 64, 1000, 4096, 65536, 262144, 300000, 1 << 20])


def test_gc_of_tensors_in_use_on_other_streams_never_frees_them_early(gate):
    rng = random.Random(SEED)
    streams = [rill.default_stream()] + [rill.Stream(name=f"gc-{i}") for i in range(STREAMS)]
    gc.collect()
    rill.synchronize()
    baseline = rill.memory_allocated()
    value = 0.0
    for rnd in range(ROUNDS):
        gates, reads, fresh = [], [], []
        for _ in range(rng.randint(1, 4)):
            a, b = rng.sample(streams, 2)
            value += 1.0
            with rill.stream(a):
                x = rill.full(_size(rng), value)
            b.wait_stream(a)
            g = type(gate)()
            gates.append(g)
            b.launch_host_func(g)
            with rill.stream(b):
                y = x * 1.0 if rng.random() < 0.5 else x + 0.0  # reads x on b
            reads.append((y, value))
            if rng.random() < 0.3:
                cycle = [x]
                cycle.append(cycle)  # freed by the collector, not by the count
                del cycle
            del x
        if rng.random() < 0.5:
            gc.collect()
        for s in streams:
            for _ in range(rng.randint(1, 3)):
                with rill.stream(s):
                    value += 1.0
                    fresh.append((rill.full(_size(rng), value), value))
        for g in gates:
            g.open()
        for t, v in reads + fresh:
            got = t.numpy()
            bad = np.flatnonzero(got != np.float32(v))
            assert bad.size == 0, (
                f"seed {SEED} round {rnd}: element {bad[0]} of {got.size} is {got[bad[0]]}, "
                f"expected {v}: memory was reused while a stream still used it")
        assert not any(g.timed_out for g in gates)
    del reads, fresh, t, got, y
    gc.collect()
    rill.synchronize()
    assert rill.memory_allocated() == baseline


def test_seed000_pattern_del_while_another_stream_reads(gate):
    """Seed 000's example, deterministic: s1 holds a read of add_s0 behind a
    gate while add_s0 is deleted and the default stream allocates and writes
    a tensor of the same size, which the pool must not place on add_s0."""
    s1 = rill.Stream()
    n = 1 << 18
    input_s0 = rill.full(n, 1.0)
    add_s0 = input_s0 + 1
    s1.wait_stream(rill.default_stream())
    s1.launch_host_func(gate)
    with rill.stream(s1):
        add_s1 = add_s0 + 1
    del add_s0
    mess = [rill.full(n, -7.0) + 0 for _ in range(4)]
    gate.open()
    assert np.all(add_s1.numpy() == 3.0)
    assert all(np.all(m.numpy() == -7.0) for m in mess)
