# SPDX-License-Identifier: MIT
"""torch.rill: torch.cuda's calls for rill's devices, where rill has the
concept. Streams and events are PyTorch's own ``torch.Stream`` and
``torch.Event`` on rill streams and events; memory figures are those of
rill's stream-ordered pool."""

import torch

from . import _C

_TYPE = "rill"


def is_available():
    return _C._device_count() > 0


def is_initialized():
    return not _C._is_in_bad_fork()


def init():
    """Nothing to do but in a forked child (see _lazy_init): rill
    initialises itself on first use."""
    _lazy_init()


def _lazy_init():
    """Raises in a child forked from a process that had used rill, as
    torch.cuda does (PyTorch calls it before making a tensor on the
    device); rill initialises itself on first use."""
    if _C._is_in_bad_fork():
        _C._refuse_after_fork()


def device_count():
    return _C._device_count()


def current_device():
    return _C._current_device()


def _index(device, optional=True):
    """The rill device index that device names (None: the current device)."""
    if device is None:
        return _C._current_device() if optional else 0
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != _TYPE:
            raise ValueError(f"expected a rill device, got {device}")
        return _C._current_device() if device.index is None else device.index
    raise TypeError(f"expected a rill device, an index or None, got {device!r}")


def set_device(device):
    index = _index(device)
    if index >= 0:
        _C._set_device(index)


def name_ops(enabled=True):
    """Names the commands rill runs for PyTorch after the aten ops that
    submit them, in rill's traces ("aten::mm (matmul_f32)") and stream
    sanitizer reports ("kernel 'matmul_f32' of aten::mm"). On from import
    when RILL_TRACE or RILL_SANITIZE is set; it costs every op a
    RecordFunction while on."""
    _C._name_ops(bool(enabled))


def naming_ops():
    return _C._naming_ops()


def get_device_name(device=None):
    return _C._device_name(_index(device))


class _RillDeviceProperties:
    """What get_device_properties returns: rill_device_info's figures under
    torch.cuda's names."""

    def __init__(self, dev):
        self.name = dev.name
        self.type = dev.kind  # "cpu" or "cuda"
        self.total_memory = dev.memory_bytes
        self.multi_processor_count = dev.compute_units
        self.is_integrated = dev.kind == "cpu"

    def __repr__(self):
        return (f"_RillDeviceProperties(name='{self.name}', type='{self.type}', total_memory="
                f"{self.total_memory // (1 << 20)}MB, multi_processor_count="
                f"{self.multi_processor_count})")


def get_device_properties(device=None):
    """The device's name, kind (type: "cpu" or "cuda"), memory (total_memory:
    what rill may take, for a CPU device) and compute units
    (multi_processor_count: worker threads, or a GPU's multiprocessors)."""
    import rill
    return _RillDeviceProperties(rill.device(_index(device)))


def is_bf16_supported(including_emulation=True):
    """bfloat16 tensors work on every rill device (their ops run PyTorch's
    CPU kernels where rill has none)."""
    return True


class device_of:
    """Makes the device of obj (a tensor or storage) current, as
    torch.cuda.device_of; does nothing for an object of another device."""

    def __init__(self, obj):
        self._index = obj.get_device() if obj.device.type == _TYPE else -1
        self._previous = -1

    def __enter__(self):
        if self._index >= 0:
            self._previous = _C._exchange_device(self._index)

    def __exit__(self, *exc):
        if self._index >= 0:
            _C._set_device(self._previous)
        return False


class device:
    """Context manager that makes a rill device current, as torch.cuda.device."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc):
        _C._exchange_device(self.prev_idx)
        return False


def synchronize(device=None):
    """Waits for the work queued on the device's streams (as
    torch.cuda.synchronize)."""
    _C._synchronize(_index(device))


def clear_errors(device=None):
    """Lets the device's default stream and the streams torch.rill handed
    out run new work after a failure (Stream.clear_error on each). A
    failure skips the work queued behind it on its stream and on streams
    waiting for it; tensors that work should have written hold no result."""
    _C._clear_errors(_index(device))


class Stream(torch.Stream):
    """A rill stream, as torch.cuda.Stream: ``Stream(device=None,
    priority=0)`` takes one from the device's pool of streams of that
    priority (lower is higher; rill's range is device_module's
    priority_range()); ``Stream(stream_id=..., device_index=...,
    device_type=...)`` names an existing one."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:
            return super().__new__(cls, **kwargs)
        with globals()["device"](device):
            return super().__new__(cls, device=torch.device(_TYPE, current_device()),
                                   priority=priority)

    def __repr__(self):
        return f"<torch.rill.Stream device={self.device} stream_id={self.stream_id}>"

    def clear_error(self):
        """Lets the stream run new work after a kernel or op of it failed
        (rill_stream_clear_error): work queued behind the failure was
        skipped, and tensors it should have written hold no result."""
        _C._clear_stream_error(self.stream_id, self.device_index)

    @property
    def rill_handle(self):
        """The rill_stream * behind it, as an integer (rill's Python package
        wraps such handles)."""
        return _C._stream_handle(self.stream_id, self.device_index)


def _stream(parts):
    stream_id, index, device_type = parts
    return Stream(stream_id=stream_id, device_index=index, device_type=device_type)


def current_stream(device=None):
    return _stream(_C._current_stream(_index(device)))


def default_stream(device=None):
    return _stream(_C._default_stream(_index(device)))


def set_stream(stream):
    if stream is not None:
        _C._set_stream(stream.stream_id, stream.device_index)


# torch.rill.stream(s) (as torch.cuda.stream): a with block in which s, a
# rill torch.Stream, and its device are current; None does nothing. The
# class itself, so that a with block makes no Python call.
StreamContext = _C.StreamContext
stream = StreamContext


class _EventType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == _TYPE


_TIMING, _BLOCKING, _INTERPROCESS = _C._event_flags()


class InterprocessEvent(torch.Event):
    """A torch.Event of rill that other processes may open: what
    ``torch.rill.Event(interprocess=True)`` returns. ``ipc_handle()`` gives
    its handle (bytes) and ``Event.from_ipc_handle(device, handle)`` opens
    one; records in every process that holds it number one sequence (see
    rill_event_ipc_handle). It pickles as its handle, so multiprocessing
    can send it."""

    def ipc_handle(self):
        return _C._event_ipc_handle(self)

    @classmethod
    def from_ipc_handle(cls, device, handle):
        index = _index(device)
        event = cls(device=torch.device(_TYPE, index), enable_timing=False)
        _C._adopt_opened_event(event, index, handle)
        return event

    def __reduce__(self):
        return (InterprocessEvent.from_ipc_handle, (self.device.index, self.ipc_handle()))


class Event(metaclass=_EventType):
    """A rill event, as torch.cuda.Event: ``Event(enable_timing=False,
    blocking=False, interprocess=False)`` is PyTorch's torch.Event on the
    current rill device (or device=), so that it mixes with torch.Event's
    calls (elapsed_time takes exactly a torch.Event). blocking makes host
    waits sleep rather than spin (RILL_EVENT_BLOCKING_SYNC); interprocess
    gives an InterprocessEvent (RILL_EVENT_INTERPROCESS; not with
    enable_timing)."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False, device=None):
        index = _index(device)
        kind = InterprocessEvent if interprocess else torch.Event
        event = kind(device=torch.device(_TYPE, index), enable_timing=enable_timing)
        if blocking or interprocess:
            flags = ((_TIMING if enable_timing else 0) | (_BLOCKING if blocking else 0)
                     | (_INTERPROCESS if interprocess else 0))
            _C._adopt_new_event(event, index, flags)
        return event

    @staticmethod
    def from_ipc_handle(device, handle):
        """Opens the event whose ipc_handle() handle is (in this or another
        process) on rill device device, as torch.cuda.Event.from_ipc_handle."""
        return InterprocessEvent.from_ipc_handle(device, handle)


# Memory, read from rill's pool (PyTorch's accelerator calls reach the same
# allocator).


def memory_allocated(device=None):
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device=None):
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device=None):
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device=None):
    return torch.accelerator.max_memory_reserved(_index(device))


def memory_stats(device=None):
    return torch.accelerator.memory_stats(_index(device))


def reset_peak_memory_stats(device=None):
    torch.accelerator.reset_peak_memory_stats(_index(device))


def _reset_peaks_instead(name, device):
    import warnings
    warnings.warn(f"torch.rill.{name} now calls torch.rill.reset_peak_memory_stats, which "
                  "resets every peak memory figure", FutureWarning, stacklevel=3)
    reset_peak_memory_stats(device)


def reset_max_memory_allocated(device=None):
    """Deprecated in torch.cuda too: reset_peak_memory_stats resets every peak."""
    _reset_peaks_instead("reset_max_memory_allocated", device)


def reset_max_memory_cached(device=None):
    """Deprecated in torch.cuda too: reset_peak_memory_stats resets every peak."""
    _reset_peaks_instead("reset_max_memory_cached", device)


def memory_stats_as_nested_dict(device=None):
    """memory_stats() with its dotted keys as nested dicts."""
    nested = {}
    for key, value in memory_stats(device).items():
        *path, last = key.split(".")
        level = nested
        for part in path:
            level = level.setdefault(part, {})
        level[last] = value
    return nested


def memory_summary(device=None, abbreviated=False):
    """rill's table of the device's memory (rill_mem_summary): allocated and
    reserved bytes now and at peak, the limit and what chose it, and each
    pool's segments and blocks. abbreviated is accepted for torch.cuda's
    signature; the table is short either way."""
    import rill
    return rill.memory_summary(_index(device))


def set_per_process_memory_fraction(fraction, device=None):
    """Caps the memory rill's pool reserves on the device at fraction of its
    total_memory (rill_mem_set_limit); an allocation past it raises
    torch.OutOfMemoryError, as torch.cuda's does."""
    import rill
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    index = _index(device)
    total = rill.device(index).memory_bytes
    rill.set_memory_limit(None if fraction == 1 else max(1, int(fraction * total)), index)


def get_per_process_memory_fraction(device=None):
    """The fraction set_per_process_memory_fraction set (1.0: no cap)."""
    import rill
    index = _index(device)
    limit = rill.memory_limit(index)
    return 1.0 if limit is None else limit / rill.device(index).memory_bytes


OutOfMemoryError = torch.OutOfMemoryError


def reset_accumulated_memory_stats(device=None):
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def empty_cache():
    ipc_collect()
    torch.accelerator.empty_cache()


def ipc_collect():
    """Lets go of the memory sent to other processes that every receiver
    has released (torch.cuda.ipc_collect; see torch_rill.multiprocessing)."""
    from .multiprocessing import ipc_collect as collect
    collect()


def mem_get_info(device=None):
    return torch.accelerator.get_memory_info(_index(device))


def host_memory_stats():
    """Figures of pinned host memory (pin_memory) as torch.cuda's: blocks
    and bytes held (allocations, allocated_bytes: live tensors' and those
    freed once their queued copies ran), handed out (active_requests,
    active_bytes), each .current, .peak, .allocated and .freed, and
    num_host_alloc, num_host_free."""
    return dict(sorted(_C._host_memory_stats().items()))


def reset_peak_host_memory_stats():
    _C._reset_peak_host_memory_stats()


def reset_accumulated_host_memory_stats():
    _C._reset_accumulated_host_memory_stats()


# Random numbers: each device's generator is PyTorch's torch.Generator.


def _generator(device=None):
    return _C._default_generator(_index(device))


def manual_seed(seed):
    _generator().manual_seed(int(seed))


def manual_seed_all(seed):
    for index in range(device_count()):
        _generator(index).manual_seed(int(seed))


def seed():
    _generator().seed()


def seed_all():
    for index in range(device_count()):
        _generator(index).seed()


def initial_seed():
    return _generator().initial_seed()


def get_rng_state(device=None):
    return _generator(device).get_state()


def set_rng_state(new_state, device=None):
    _generator(device).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(index) for index in range(device_count())]


def set_rng_state_all(new_states):
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def _inductor_backend_init():
    """Inductor's hook for an out-of-tree device, called at its first
    compile (importing inductor at import would cost a second)."""
    from .inductor import register
    register()


def _is_in_bad_fork():
    return _C._is_in_bad_fork()


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16, torch.float32]


def is_autocast_enabled():
    return torch.is_autocast_enabled(_TYPE)


# Graphs: capture and replay on rill's stream capture, through PyTorch's
# device-generic graph (torch.accelerator.Graph is the same object).

_CAPTURE_MODES = ("default", "global", "thread_local", "relaxed")


def is_current_stream_capturing():
    """Whether the current stream of the current rill device is capturing
    (torch.cuda.is_current_stream_capturing)."""
    return _C._is_current_stream_capturing()


def graph_pool_handle():
    """A new pool id for ``pool=`` of graphs (torch.cuda.graph_pool_handle).
    rill gives each graph memory of its own, so sharing an id does not
    share memory: it is accepted, and that graph's pool() returns it."""
    return _C._graph_pool_handle()


class RillGraph(torch._C._acceleratorGraph):
    """A graph of rill work, as torch.cuda.CUDAGraph: ``capture_begin(pool=None,
    capture_error_mode="global")`` captures what is then queued on the
    current stream (and on streams forked from it by waiting on it, joined
    back before the end), ``capture_end`` ends the capture and instantiates
    the graph (unless ``keep_graph=True``: then ``instantiate`` or the first
    ``replay`` does), ``replay`` runs it on the current stream, ``reset``
    drops it so that it can capture again. Tensors allocated in the capture
    keep their addresses at every replay and stay valid while they live,
    after reset too. ``enable_debug_mode`` before ``capture_end`` keeps the
    graph for ``debug_dump(path)``, which writes it in Graphviz's DOT."""

    def __new__(cls, keep_graph=False):
        return super().__new__(cls, keep_graph)

    def __init__(self, keep_graph=False):
        super().__init__(keep_graph)

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if capture_error_mode not in _CAPTURE_MODES:
            raise ValueError(f"capture_error_mode must be one of {_CAPTURE_MODES}, "
                             f"not {capture_error_mode!r}")
        super().capture_begin(pool=pool, capture_error_mode=capture_error_mode)


class graph:
    """Captures the with-block into a RillGraph (or torch.accelerator.Graph),
    as torch.cuda.graph: it synchronizes the device and empties the cache,
    makes ``stream`` current (by default a side stream shared by all
    torch.rill.graph contexts) and captures on it with ``capture_error_mode``
    ("global", "thread_local" or "relaxed": rill_capture_mode's
    RILL_CAPTURE_GLOBAL, THREAD_LOCAL, RELAXED). ``pool`` is another graph's
    pool() or graph_pool_handle(), accepted as a hint."""

    default_capture_stream = None

    def __init__(self, rill_graph, pool=None, stream=None, capture_error_mode="global"):
        if self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = Stream()
        self.pool = pool
        self.capture_stream = stream if stream is not None else self.__class__.default_capture_stream
        self.stream_ctx = StreamContext(self.capture_stream)
        self.rill_graph = rill_graph
        self.capture_error_mode = capture_error_mode

    def __enter__(self):
        synchronize()
        empty_cache()
        self.stream_ctx.__enter__()
        try:
            # The base's capture_begin takes both for RillGraph and
            # torch.accelerator.Graph alike.
            torch._C._acceleratorGraph.capture_begin(
                self.rill_graph, pool=self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        try:
            self.rill_graph.capture_end()
        finally:
            self.stream_ctx.__exit__(*exc)
        return False


from .graphed import make_graphed_callables  # noqa: E402,F401  (it uses the names above)
