# SPDX-License-Identifier: MIT
"""The stream, event and allocator tests of PyTorch's test/test_cuda.py
(TestCuda: test_streams, test_stream_event_repr, test_events,
test_record_stream, test_stream_context_manager,
test_multi_device_stream_context_manager,
test_caching_allocator_record_stream_oom and
test_graph_capture_reset_recapture), run on rill.compat.torch with
the import changed. Where a line differs otherwise, a comment says why:
rill has no uint8 tensors, no CUDA legacy stream (handle 0), and a
torch.cuda._sleep that sleeps in a host function at CYCLES_PER_MS."""

import gc
import unittest

import pytest

import rill
import rill.compat.torch as torch


def get_cycles_per_ms():
    """torch.testing's helper: the cycles torch.cuda._sleep spins a millisecond."""
    return torch.cuda.CYCLES_PER_MS


class TestCuda(unittest.TestCase):

    def test_streams(self):
        default_stream = torch.cuda.current_stream()
        user_stream = torch.cuda.Stream()
        self.assertEqual(torch.cuda.current_stream(), default_stream)
        self.assertNotEqual(default_stream, user_stream)
        # rill's default stream is a stream like the others: its handle is not 0.
        self.assertNotEqual(default_stream.cuda_stream, user_stream.cuda_stream)
        self.assertNotEqual(user_stream.cuda_stream, 0)
        with torch.cuda.stream(user_stream):
            self.assertEqual(torch.cuda.current_stream(), user_stream)
        self.assertTrue(user_stream.query())
        tensor1 = torch.FloatTensor(5).pin_memory()  # no ByteTensor: float32
        tensor2 = tensor1.cuda(non_blocking=True) + 1
        default_stream.synchronize()
        self.assertTrue(default_stream.query())

    def test_stream_event_repr(self):
        s = torch.cuda.current_stream()
        self.assertTrue("torch.cuda.Stream" in s.__repr__())
        e = torch.cuda.Event()
        self.assertTrue("torch.cuda.Event" in e.__repr__())
        s.record_event(e)
        self.assertTrue("torch.cuda.Event" in e.__repr__())

    def test_events(self):
        stream = torch.cuda.current_stream()
        event = torch.cuda.Event(enable_timing=True)
        self.assertTrue(event.query())
        start_event = torch.cuda.Event(enable_timing=True)
        stream.record_event(start_event)
        torch.cuda._sleep(int(50 * get_cycles_per_ms()))
        stream.record_event(event)
        self.assertFalse(event.query())
        event.synchronize()
        self.assertTrue(event.query())
        self.assertGreater(start_event.elapsed_time(event), 0)

        event = torch.cuda.Event(enable_timing=True)
        self.assertEqual(event.cuda_event, 0)
        self.assertEqual(event.event_id, 0)

        event.record()
        self.assertNotEqual(event.cuda_event, 0)
        self.assertNotEqual(event.event_id, 0)
        self.assertEqual(event.cuda_event, event.event_id)

    def test_record_stream(self):
        cycles_per_ms = get_cycles_per_ms()

        t = torch.FloatTensor([1, 2, 3, 4]).pin_memory()
        result = torch.cuda.FloatTensor(t.size())
        stream = torch.cuda.Stream()
        ptr = [None]

        # Performs the CPU->GPU copy in a background stream
        def perform_copy():
            with torch.cuda.stream(stream):
                tmp = t.cuda(non_blocking=True)
                ptr[0] = tmp.data_ptr()
            torch.cuda.current_stream().wait_stream(stream)
            tmp.record_stream(torch.cuda.current_stream())
            torch.cuda._sleep(int(50 * cycles_per_ms))  # delay the copy
            result.copy_(tmp)

        perform_copy()
        with torch.cuda.stream(stream):
            tmp2 = torch.cuda.FloatTensor(t.size())
            tmp2.zero_()
            self.assertNotEqual(
                tmp2.data_ptr(), ptr[0], msg="allocation reused to soon"
            )

        self.assertEqual(result.tolist(), [1, 2, 3, 4])

        # In the native allocator, we expect "tmp"'s side-stream-tagged block will be reused
        # in that side stream after result.copy_(tmp) in the main stream finishes.
        torch.cuda.current_stream().synchronize()
        with torch.cuda.stream(stream):
            tmp3 = torch.cuda.FloatTensor(t.size())
            self.assertEqual(tmp3.data_ptr(), ptr[0], msg="allocation not reused")

    def test_stream_context_manager(self):
        prev_stream = torch.cuda.current_stream()
        with torch.cuda.Stream() as stream:
            self.assertEqual(stream, torch.cuda.current_stream())
        self.assertEqual(prev_stream, torch.cuda.current_stream())

    @pytest.mark.usefixtures("two_devices")  # TEST_MULTIGPU: RILL_CPU_DEVICES=2
    def test_multi_device_stream_context_manager(self):
        src_device = 0
        dst_device = 1
        torch.cuda.set_device(src_device)
        src_prev_stream = torch.cuda.current_stream(src_device)
        dst_prev_stream = torch.cuda.current_stream(dst_device)
        with torch.cuda.Stream(dst_device) as dst_stream:
            self.assertEqual(dst_device, torch.cuda.current_device())
            self.assertEqual(dst_stream, torch.cuda.current_stream())
            self.assertEqual(src_prev_stream, torch.cuda.current_stream(src_device))
        self.assertEqual(src_device, torch.cuda.current_device())
        self.assertEqual(src_prev_stream, torch.cuda.current_stream())
        self.assertEqual(dst_prev_stream, torch.cuda.current_stream(dst_device))

    def test_caching_allocator_record_stream_oom(self):
        """allocations delayed by a record_stream call should still be freed on
        an out-of-memory in cuda_malloc_retry. see issue #19219"""
        # The device's capacity: a limit of 8 of the tensors below (a CPU
        # device's memory is the machine's), which the loop would pass 12 times.
        before = rill.memory_limit()
        rill.set_memory_limit(8 * 4 * 1024 * 1024 * 4)
        try:
            stream = torch.cuda.Stream()

            with torch.cuda.stream(stream):
                y = torch.zeros(4 * 1024 * 1024, device="cuda")

            for _ in range(100):
                x = torch.empty(4 * 1024 * 1024, device="cuda")
                with torch.cuda.stream(stream):
                    y += x
                # delays reuse of `x` until after all operations in `stream`
                x.record_stream(stream)
                del x

            # we've made a mess by allocating up to the device capacity. free any
            # cached blocks in case it affects future tests.
            torch.cuda.empty_cache()
        finally:
            torch.cuda.synchronize()
            gc.collect()
            rill.set_memory_limit(before)

    def test_graph_capture_reset_recapture(self):
        s = torch.cuda.Stream()

        with torch.cuda.stream(s):
            a = torch.full((1000,), 1, device="cuda")
            g = torch.cuda.CUDAGraph()
            torch.cuda.empty_cache()
            g.capture_begin()
            b = a
            for _ in range(10):
                b = b + 1
            g.capture_end()
        torch.cuda.current_stream().wait_stream(s)

        g.replay()

        self.assertTrue(b.sum().item() == 11000.)

        g.reset()

        with torch.cuda.stream(s):
            g.capture_begin()
            b.fill_(2.0)
            for _ in range(10):
                b = b + 2
            g.capture_end()
        torch.cuda.current_stream().wait_stream(s)

        g.replay()
        self.assertTrue(b.sum().item() == 22000.)

        g.reset()
        del g
