# SPDX-License-Identifier: MIT
"""Pinned host memory: pin_memory() and pin_memory=True on rill_malloc_host,
is_pinned(), and non_blocking copies between it and rill tensors queued on
the current stream."""

import time

import torch

from conftest import delay, gate

N = 1 << 16


def test_pin_memory_round_trip_and_is_pinned():
    t = torch.randn(N)
    p = t.pin_memory()
    assert p.is_pinned() and not t.is_pinned()
    assert p[N // 2:].is_pinned()  # a view into the pinned block
    assert torch.equal(p, t)
    assert torch.empty(8, pin_memory=True).is_pinned()
    d = p.to("rill", non_blocking=True)
    back = torch.empty(N, pin_memory=True)
    back.copy_(d, non_blocking=True)
    torch.rill.current_stream().synchronize()
    assert torch.equal(back, t)


def test_a_non_blocking_copy_from_pinned_memory_is_queued_on_the_current_stream():
    src = torch.arange(N, dtype=torch.float32).pin_memory()
    dst = torch.zeros(N, device="rill")
    stream = torch.rill.current_stream()
    opened = gate(stream)
    start = time.monotonic()
    dst.copy_(src, non_blocking=True)  # queued behind the gate: returns at once
    returned_after = time.monotonic() - start
    still_queued = not stream.query()
    opened.set()
    stream.synchronize()
    assert still_queued, f"copy_ waited for the stream ({returned_after:.2f} s)"
    assert torch.equal(dst.cpu(), src)


def test_a_non_blocking_copy_into_pinned_memory_is_queued_on_the_current_stream():
    src = torch.arange(N, dtype=torch.float32, device="rill")
    dst = torch.full((N,), -1.0).pin_memory()
    stream = torch.rill.current_stream()
    opened = gate(stream)
    dst.copy_(src, non_blocking=True)
    still_queued = not stream.query()
    untouched = bool((dst == -1.0).all())  # the copy waits behind the gate
    opened.set()
    stream.synchronize()
    assert still_queued and untouched
    assert torch.equal(dst, torch.arange(N, dtype=torch.float32))


def test_a_non_blocking_copy_of_pageable_memory_is_done_when_it_returns():
    src = torch.arange(N, dtype=torch.float32)
    dst = torch.zeros(N, device="rill")
    delay(torch.rill.current_stream(), 0.05)
    dst.copy_(src, non_blocking=True)
    src.fill_(-7.0)  # pageable memory may change once copy_ returned
    assert torch.equal(dst.cpu(), torch.arange(N, dtype=torch.float32))


def test_pinned_memory_is_freed_when_its_tensor_dies():
    torch.accelerator.empty_host_cache()
    before = torch.rill.host_memory_stats()
    p = torch.empty(N, pin_memory=True)
    during = torch.rill.host_memory_stats()
    assert during["active_bytes.current"] == before["active_bytes.current"] + 4 * N
    assert during["allocated_bytes.current"] == before["allocated_bytes.current"] + 4 * N
    assert during["num_host_alloc"] == before["num_host_alloc"] + 1
    del p
    after = torch.rill.host_memory_stats()
    assert after["active_bytes.current"] == before["active_bytes.current"]
    assert after["allocated_bytes.current"] == before["allocated_bytes.current"]
    assert after["num_host_free"] == before["num_host_free"] + 1


def test_pinned_memory_that_a_queued_copy_reads_outlives_its_tensor():
    torch.accelerator.empty_host_cache()
    before = torch.rill.host_memory_stats()
    src = torch.full((N,), 3.0).pin_memory()
    dst = torch.zeros(N, device="rill")
    stream = torch.rill.current_stream()
    opened = gate(stream)
    dst.copy_(src, non_blocking=True)
    del src  # the copy behind the gate still reads it
    held = torch.rill.host_memory_stats()
    opened.set()
    stream.synchronize()
    torch.accelerator.empty_host_cache()
    after = torch.rill.host_memory_stats()
    assert held["active_bytes.current"] == before["active_bytes.current"]
    assert held["allocated_bytes.current"] == before["allocated_bytes.current"] + 4 * N
    assert after["allocated_bytes.current"] == before["allocated_bytes.current"]
    assert torch.equal(dst.cpu(), torch.full((N,), 3.0))
