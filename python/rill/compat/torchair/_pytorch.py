# SPDX-License-Identifier: MIT
"""torchair on PyTorch itself, with the device rill (where rill.compat.torch
is PyTorch: RILL_COMPAT_TORCH, rill/compat/torch/_pytorch.py). The scope and
the ops call torch_rill's custom ops torch.ops.rill.* (torch_rill/tagged.py),
which torch.compile(fullgraph=True) keeps in the graph it hands the backend;
get_npu_backend's backend runs that graph (max-autotune) or captures it into
a rill graph and replays it (reduce-overhead)."""

import os
import re

import torch
import torch.fx
from torch.utils import _pytree

import torch_rill  # noqa: F401 - the rill device and torch.rill
from torch_rill import tagged as _tagged  # registers torch.ops.rill.*


class _TaggedEvent:
    """What npu_create_tagged_event returns: the name of rill's tagged
    event (rill_event_get_tagged), which the ops record and wait for."""

    def __init__(self, tag):
        self.tag = tag

    def __repr__(self):
        return f"<torchair tagged event {self.tag!r} on rill>"


_events = {}


def npu_create_tagged_event(tag):
    """The event that tag names (the same object for the same tag)."""
    if not isinstance(tag, str):
        raise TypeError("torchair.ops.npu_create_tagged_event: tag must be a str, "
                        f"not {type(tag).__name__}")
    return _events.setdefault(tag, _TaggedEvent(tag))


def _event_tag(event, where):
    if not isinstance(event, _TaggedEvent):
        raise TypeError(f"{where}: event must come from npu_create_tagged_event, "
                        f"not {type(event).__name__}")
    return event.tag


def npu_tagged_event_record(event):
    """Records event on the current stream (torch.ops.rill.tagged_event_record)."""
    torch.ops.rill.tagged_event_record(_event_tag(event, "torchair.ops.npu_tagged_event_record"))


def npu_tagged_event_wait(event):
    """Makes the current stream wait for event's last record
    (torch.ops.rill.tagged_event_wait)."""
    torch.ops.rill.tagged_event_wait(_event_tag(event, "torchair.ops.npu_tagged_event_wait"))


def npu_record_tagged_stream(input, tagged_stream):
    """Marks input's memory as used by the stream that tagged_stream names
    until input is freed: input.record_stream on that stream
    (torch.ops.rill.record_tagged_stream). rill's pool already holds memory
    back for the ops it sees on other streams; this records the uses it
    cannot see, as tensor.record_stream does. Inside a capture the memory
    is the graph's and lives as long as the graph."""
    where = "torchair.ops.npu_record_tagged_stream"
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"{where}: input must be a tensor, not {type(input).__name__}")
    if not isinstance(tagged_stream, str):
        raise TypeError(f"{where}: tagged_stream must be a str tag, "
                        f"not {type(tagged_stream).__name__}")
    torch.ops.rill.record_tagged_stream(input, tagged_stream)


class _StreamSwitch:
    """The with block of npu_stream_switch: its enter and exit are the custom
    ops stream_switch_enter and stream_switch_exit, so Dynamo records them."""

    def __init__(self, tag, priority):
        self.tag = tag
        self.priority = priority

    def __enter__(self):
        torch.ops.rill.stream_switch_enter(self.tag, self.priority)
        return self

    def __exit__(self, *exc):
        torch.ops.rill.stream_switch_exit(self.tag)
        return False


def npu_stream_switch(stream_tag, stream_priority=0):
    """`with npu_stream_switch(tag, priority=0):` runs the block's ops on the
    tagged rill stream of tag (the same stream for the same tag, created at
    first use with priority); after the block, on the stream before. A
    tensor made on one stream and read on another needs a tagged event
    between them, as on Ascend."""
    if not isinstance(stream_tag, str):
        raise TypeError("torchair.scope.npu_stream_switch: stream_tag must be a str, "
                        f"not {type(stream_tag).__name__}")
    if isinstance(stream_priority, bool) or not isinstance(stream_priority, int):
        raise TypeError("torchair.scope.npu_stream_switch: stream_priority must be an int, "
                        f"not {type(stream_priority).__name__}")
    return _StreamSwitch(stream_tag, stream_priority)


# The backend.


def _tags(gm):
    """The tags of the streams that gm's stream switches enter, in order of
    first entry, each with the priority of its first entry."""
    enter = (torch.ops.rill.stream_switch_enter, torch.ops.rill.stream_switch_enter.default)
    tags = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in enter:
            tag, priority = node.args[0], node.args[1] if len(node.args) > 1 else 0
            tags.setdefault(tag, priority)
    return list(tags.items())


def _run(gm, tags, args, run=None):
    """Runs gm on the current stream, its switches on the tagged streams:
    each tagged stream first waits for the current stream (the inputs are
    ready) and the current stream waits for each at the end (the outputs
    are), as torchair joins its streams at the end of a graph."""
    origin = torch.rill.current_stream()
    streams = [_tagged.tagged_stream(tag, priority) for tag, priority in tags]
    depth = _tagged.depth()
    for stream in streams:
        stream.wait_stream(origin)
    try:
        out = (run or gm)(*args)
    except BaseException:
        _tagged.unwind(depth)
        for stream in streams:
            try:
                origin.wait_stream(stream)
            except Exception:  # noqa: S110 - a failed capture refuses it; the first error goes up
                pass
        raise
    for stream in streams:
        origin.wait_stream(stream)
    return out


def _op_name(node):
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        return f"module {node.target}"
    name = getattr(node.target, "__qualname__", None) or getattr(node.target, "__name__", None)
    return name or str(node.target)


def _where(node):
    """The op of node and the line of the model that made it."""
    lines = [line.strip() for line in (node.meta.get("stack_trace") or "").splitlines()
             if line.strip(" ^~\t")]  # not the markers under the code
    found = re.match(r'File "(.*)", line (\d+)', lines[-2]) if len(lines) >= 2 else None
    line = (f", {os.path.basename(found[1])}:{found[2]}: {lines[-1]}" if found else "")
    return f"{_op_name(node)} (FX node {node.name}{line})"


class _Naming(torch.fx.Interpreter):
    """Runs the graph node by node, remembering the node that failed."""

    failed = None

    def run_node(self, node):
        try:
            return super().run_node(node)
        except BaseException:
            self.failed = node
            raise


def _storage(t):
    return t.untyped_storage().data_ptr()


def _static(arg):
    """The static input of a capture for arg: a parameter itself, whose
    memory the graph then reads where it is, as PyTorch's CUDA graph trees
    treat parameters (a parameter is the same tensor from call to call,
    updated in place by optimizers); a copy of any other tensor."""
    if isinstance(arg, torch.nn.Parameter):
        return arg
    return arg.clone() if isinstance(arg, torch.Tensor) else arg


class _Capture:
    """One captured graph for one set of input shapes: static inputs, the
    graph, its outputs."""

    def __init__(self, device, graph, static, outputs, spec, mutated):
        self.device = device
        self.graph = graph
        self.static = static
        self.outputs = outputs
        self.spec = spec
        self.mutated = mutated
        self.done = None

    def same_parameters(self, args):
        """Whether each parameter the graph reads in place is args' tensor
        at its position (the same memory): a parameter replaced since the
        capture needs a capture of its own."""
        return all(arg is static or (isinstance(arg, torch.Tensor) and
                                     arg.data_ptr() == static.data_ptr())
                   for static, arg in zip(self.static, args)
                   if isinstance(static, torch.nn.Parameter))


class _Graph:
    """reduce-overhead: what the backend returns for one FX graph."""

    def __init__(self, backend, gm):
        self.backend = backend
        self.gm = gm
        self.tags = _tags(gm)
        # signature -> the inputs the warm-up wrote (a list), then its _Capture
        self.by_signature = {}

    def __call__(self, *args):
        signature, device = self._signature(args)
        entry = self.by_signature.get(signature, False)
        if entry is False:
            out, mutated = self._warm_up(args, device)
            self.by_signature[signature] = mutated
            return out
        if not isinstance(entry, _Capture):
            entry = self.by_signature[signature] = self._capture(args, device, entry)
        elif not entry.same_parameters(args):
            entry = self.by_signature[signature] = self._capture(args, device, entry.mutated)
        return self._replay(entry, args)

    def _signature(self, args):
        where = "torchair reduce-overhead"
        parts, device = [], None
        for index, arg in enumerate(args):
            if isinstance(arg, torch.Tensor):
                if arg.device.type != "rill" or (device is not None and arg.device != device):
                    raise ValueError(
                        f"{where}: input {index} is on {arg.device}; a rill graph replays the "
                        f"work of one rill device: put the model and its inputs on "
                        f"{device or 'rill'}, or use mode 'max-autotune'")
                device = arg.device
                parts.append((tuple(arg.shape), arg.stride(), arg.dtype, arg.device))
            else:
                parts.append((type(arg), arg))
        if device is None:
            device = torch.device("rill", torch.rill.current_device())
        return tuple(parts), device

    def _warm_up(self, args, device):
        """The first call for a set of shapes runs the graph eagerly; returns
        its result and which inputs it wrote, after checking that the
        outputs can be captured."""
        where = "torchair reduce-overhead"
        versions = [a._version if isinstance(a, torch.Tensor) else None for a in args]
        states = (torch.get_rng_state(), torch.rill.get_rng_state(device))
        with torch.rill.device(device):
            out = _run(self.gm, self.tags, args)
        if not all(torch.equal(a, b) for a, b in
                   zip(states, (torch.get_rng_state(), torch.rill.get_rng_state(device)))):
            raise RuntimeError(
                f"{where}: the graph draws random numbers, which a replay would repeat: draw "
                f"them outside the compiled model and pass them in, or use mode 'max-autotune'")
        mutated = [i for i, a in enumerate(args)
                   if isinstance(a, torch.Tensor) and a._version != versions[i]]
        inputs = {_storage(a): i for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
        seen = {}
        for index, t in enumerate(_pytree.tree_leaves(out)):
            if not isinstance(t, torch.Tensor):
                continue
            if torch.is_grad_enabled() and t.requires_grad:
                raise RuntimeError(
                    f"{where}: output {index} requires grad, and a replayed graph records no "
                    f"autograd: call the model under torch.no_grad() or "
                    f"torch.inference_mode(), or use mode 'max-autotune'")
            ptr = _storage(t)
            if ptr in inputs:
                raise RuntimeError(
                    f"{where}: output {index} shares memory with input {inputs[ptr]} (a view or "
                    f"the input itself), which a replayed graph cannot give back: return a "
                    f"clone, or use mode 'max-autotune'")
            if ptr in seen:
                raise RuntimeError(
                    f"{where}: outputs {seen[ptr]} and {index} share memory, which the copies "
                    f"of a replay's outputs cannot keep: return a clone of one, or use mode "
                    f"'max-autotune'")
            seen[ptr] = index
        return out, mutated

    def _capture(self, args, device, mutated):
        """Captures the graph on static copies of args (parameters as they
        are: _static), on torch.rill.graph's side stream, its tagged streams
        forked from it and joined back."""
        where = "torchair reduce-overhead"
        static = [_static(a) for a in args]
        graph = torch.rill.RillGraph()
        naming = _Naming(self.gm)
        failure = None
        try:
            with torch.rill.device(device), torch.rill.graph(graph):
                try:
                    outputs = _run(self.gm, self.tags, static, naming.run)
                except BaseException as exc:
                    failure = exc
                    raise
        except Exception as exc:
            failure = failure or exc
            if naming.failed is None:
                raise RuntimeError(f"{where}: capturing the graph into a rill graph failed: "
                                   f"{failure}") from failure
            raise RuntimeError(
                f"{where}: {_where(naming.failed)} cannot be captured into a rill graph: "
                f"{failure}. Leave the op out of the compiled model, or use mode "
                f"'max-autotune'") from failure
        self.backend.captures += 1
        leaves, spec = _pytree.tree_flatten(outputs)
        return _Capture(device, graph, static, leaves, spec, mutated)

    def _replay(self, entry, args):
        """Copies args into the static inputs (not the parameters, which
        are the static inputs themselves), replays on the current stream
        and returns copies of the outputs, which the next replay leaves
        alone; inputs the graph writes get the static inputs' values."""
        stream = torch.rill.current_stream(entry.device)
        if entry.done is not None:  # the last call, from another stream, is done with them
            stream.wait_event(entry.done)
        for static, arg in zip(entry.static, args):
            if isinstance(arg, torch.Tensor) and not isinstance(static, torch.nn.Parameter):
                static.copy_(arg)
        entry.graph.replay()
        out = [t.clone() if isinstance(t, torch.Tensor) else t for t in entry.outputs]
        for index in entry.mutated:
            if args[index] is not entry.static[index]:
                args[index].copy_(entry.static[index])
        if entry.done is None:
            entry.done = torch.rill.Event()
        entry.done.record(stream)
        self.backend.replays += 1
        return _pytree.tree_unflatten(out, entry.spec)


class _Eager:
    """max-autotune: the graph run eagerly, its switches on tagged streams."""

    def __init__(self, gm):
        self.gm = gm
        self.tags = _tags(gm)

    def __call__(self, *args):
        return _run(self.gm, self.tags, args)


class NpuBackend:
    """What get_npu_backend returns on PyTorch: a torch.compile backend.
    Mode "reduce-overhead": the first call of a graph for a set of input
    shapes runs it eagerly, the second captures it into a rill graph and
    every call from then on replays it (captures and replays count them),
    reading parameters where they are and copying the other inputs in.
    Mode "max-autotune": the graph runs eagerly. graphs holds the FX graphs
    torch.compile handed it."""

    def __init__(self, compiler_config):
        self.compiler_config = compiler_config
        self.graphs = []
        self.captures = 0
        self.replays = 0

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        if self.compiler_config.mode == "reduce-overhead":
            return _Graph(self, gm)
        return _Eager(gm)

    def __repr__(self):
        return f"torchair npu backend (mode={self.compiler_config.mode!r}, on rill graphs)"
