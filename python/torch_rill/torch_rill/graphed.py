# SPDX-License-Identifier: MIT
"""torch.rill.make_graphed_callables: torch.cuda.make_graphed_callables on
rill's graphs. Each callable's forward and backward are captured once (after
warm-up on a side stream) into two graphs; the callable it returns is an
autograd function that copies new inputs into the captured (static) inputs,
replays the forward graph and, in backward, copies the incoming gradients
into the static gradient outputs and replays the backward graph."""

import weakref

import torch
import torch.utils._pytree as pytree

from . import device_module as _rill

_CALL = "torch.rill.make_graphed_callables"


def _leaves(args):
    return tuple(pytree.arg_tree_leaves(*args))


def _check_callable(index, fn, args):
    """Refuses what the graphs cannot serve: hooks and trainable buffers on
    a module (AssertionError, as torch.cuda's), sample args that are not
    rill tensors, parameters elsewhere. Returns the flattened args."""
    where = f"{_CALL}: callable {index} ({type(fn).__name__})"
    if not callable(fn):
        raise TypeError(f"{where} is not callable; pass nn.Modules or functions")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"{where}: its sample args must be a tuple of tensors, not "
                        f"{type(args).__name__}")
    if isinstance(fn, torch.nn.Module):
        hooks = (fn._forward_hooks, fn._forward_pre_hooks, fn._backward_hooks,
                 fn._backward_pre_hooks)
        if any(len(h) for h in hooks):
            raise AssertionError(f"{where} has hooks registered; graph it before registering "
                                 "hooks (hooks registered afterwards are allowed)")
        if any(b.requires_grad for b in fn.buffers()):
            raise AssertionError(f"{where} has a buffer with requires_grad=True; only "
                                 "parameters may be trainable")
        for name, p in fn.named_parameters():
            if p.device.type != _rill._TYPE:
                raise ValueError(f"{where}: parameter {name} is on {p.device}, not on a rill "
                                 "device; move the module with .to('rill') first")
    flat = _leaves(args)
    for i, a in enumerate(flat):
        if not isinstance(a, torch.Tensor):
            raise AssertionError(f"{where}: sample arg {i} is a {type(a).__name__}; sample "
                                 "args must be tensors only")
        if a.device.type != _rill._TYPE:
            raise ValueError(f"{where}: sample arg {i} is on {a.device}, not on a rill device; "
                             "pass tensors on rill (x.to('rill'))")
    return flat


def _grad(outputs, inputs, grad_outputs, allow_unused):
    """torch.autograd.grad of outputs by inputs, its error about an unused
    input told in make_graphed_callables' words."""
    try:
        return torch.autograd.grad(outputs, inputs, grad_outputs, only_inputs=True,
                                   allow_unused=allow_unused)
    except RuntimeError as exc:
        if "not have been used in the graph" not in str(exc):
            raise
        raise RuntimeError(f"{_CALL}: an input (a sample arg that requires grad, or a "
                           "parameter) is not used to compute the outputs; pass "
                           "allow_unused_input=True to give it no gradient") from exc


class _Captured:
    """One callable's graphs and the static tensors they read and write."""

    def __init__(self, fn, args, flat_args, params):
        self.fn = fn
        self.args = args
        self.n_args = len(flat_args)
        self.params = params
        self.inputs = flat_args + params  # the static input surface
        self.wanted = tuple(i for i in self.inputs if i.requires_grad)
        self.fwd = _rill.RillGraph()
        self.bwd = None  # captured only when an output requires grad
        self.outputs = ()
        self.spec = None
        self.grad_outputs = ()
        self.grad_inputs = ()

    def differentiable(self, outputs):
        return tuple(o for o in outputs if o.requires_grad)

    def warm_up(self, iters, allow_unused):
        for _ in range(iters):
            outs = pytree.tree_leaves(self.fn(*self.args))
            diff = tuple(o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad)
            if diff and self.wanted:
                _grad(diff, self.wanted, tuple(torch.zeros_like(o) for o in diff), allow_unused)
            del outs, diff

    def capture_forward(self, stream, pool, mode):
        with _rill.graph(self.fwd, pool=pool, stream=stream, capture_error_mode=mode):
            result = self.fn(*self.args)
        outputs, self.spec = pytree.tree_flatten(result)
        for i, o in enumerate(outputs):
            if not isinstance(o, torch.Tensor):
                raise TypeError(f"{_CALL}: {type(self.fn).__name__} returned a "
                                f"{type(o).__name__} (output {i}); graphed callables must "
                                "return tensors only")
        self.outputs = tuple(outputs)

    def capture_backward(self, stream, pool, mode, allow_unused):
        diff = self.differentiable(self.outputs)
        self.grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None
                                  for o in self.outputs)
        grads = ()
        if diff and self.wanted:
            self.bwd = _rill.RillGraph()
            with _rill.graph(self.bwd, pool=pool, stream=stream, capture_error_mode=mode):
                grads = _grad(diff, self.wanted,
                              tuple(g for g in self.grad_outputs if g is not None), allow_unused)
        it = iter(grads)
        # One gradient slot per input; None where the input needs none.
        self.grad_inputs = tuple(next(it) if i.requires_grad and grads else None
                                 for i in self.inputs)
        # The outputs' autograd graph of the capture goes: it holds the
        # parameters' gradient accumulators, made on the capture's stream.
        # Its saved tensors are the forward graph's memory, kept by the graph.
        self.requires_grad = tuple(o.requires_grad for o in self.outputs)
        self.outputs = tuple(o.detach() for o in self.outputs)


class _Replay:
    """What a graphed callable's replays use: its graphs and static tensors
    (not the callable: a module's forward holds this)."""

    def __init__(self, c):
        self.fwd, self.bwd = c.fwd, c.bwd
        self.statics, self.n_args, self.params = c.inputs, c.n_args, c.params
        self.param_ptrs = tuple(p.data_ptr() for p in c.params)
        self.outputs, self.spec = c.outputs, c.spec
        self.grad_outputs, self.grad_inputs = c.grad_outputs, c.grad_inputs
        self.constant = tuple(i for i, rg in enumerate(c.requires_grad) if not rg)
        self.replays = 0  # forward replays: a backward needs its own forward's to be the last


class _Graphed(torch.autograd.Function):
    """Replays r's forward graph on inputs copied into its static inputs;
    backward replays its backward graph. r is an argument, not a closure of
    the class (a class is a reference cycle: what it holds would wait for
    the cyclic collector), so the graphs go when the graphed callable does."""

    @staticmethod
    def forward(ctx, r, *inputs):
        ctx.r = r
        r.replays += 1
        ctx.replay = r.replays
        for static, new in zip(r.statics[:r.n_args], inputs[:r.n_args]):
            if new.data_ptr() != static.data_ptr():
                static.copy_(new)
        r.fwd.replay()
        out = tuple(o.detach() for o in r.outputs)  # fresh tensors on the static memory
        ctx.mark_non_differentiable(*(out[i] for i in r.constant))
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        r = ctx.r
        if r.bwd is None:
            raise RuntimeError(f"{_CALL}: backward through a callable whose outputs required no "
                               "grad when it was graphed; graph it with sample args (or "
                               "parameters) that require grad")
        if ctx.replay != r.replays:
            raise RuntimeError(f"{_CALL}: the graphed callable ran again before this backward, "
                               "and its graphs' static tensors now hold the later call's; run "
                               "each call's backward before the next call")
        for static, g in zip(r.grad_outputs, grads):
            if static is not None and g is not None and g.data_ptr() != static.data_ptr():
                static.copy_(g)
        r.bwd.replay()
        # Copies: autograd may keep a gradient as a leaf's .grad, and the next
        # replay would overwrite it (then add itself to it) in place.
        return (None,) + tuple(None if g is None else g.clone() for g in r.grad_inputs)


def _graphed_function(r):
    """The callable that runs r: _Graphed over the user args and the
    module's parameters, after checking the args against the sample args."""

    def graphed(*args, **kwargs):
        if kwargs:
            raise TypeError(f"{_CALL}: a graphed callable takes its sample args' positional "
                            f"arguments only, not keywords ({', '.join(kwargs)})")
        flat = _leaves(args)
        if len(flat) != r.n_args:
            raise TypeError(f"{_CALL}: the graphed callable takes {r.n_args} tensors as its "
                            f"sample args did, got {len(flat)}")
        for i, (new, static) in enumerate(zip(flat, r.statics)):
            if not isinstance(new, torch.Tensor):
                raise TypeError(f"{_CALL}: arg {i} is a {type(new).__name__}, not a tensor")
            if new.shape != static.shape or new.dtype != static.dtype:
                raise ValueError(f"{_CALL}: arg {i} is {new.dtype} {tuple(new.shape)}, the "
                                 f"sample arg was {static.dtype} {tuple(static.shape)}; pass "
                                 "tensors of the sample args' shapes and dtypes")
            if new.requires_grad and not static.requires_grad and torch.is_grad_enabled():
                raise ValueError(f"{_CALL}: arg {i} requires grad and its sample arg did not, "
                                 "so the graph computes no gradient for it; graph with a "
                                 "sample arg that requires grad")
        for p, ptr in zip(r.params, r.param_ptrs):
            if p.data_ptr() != ptr:
                raise RuntimeError(f"{_CALL}: a parameter of the graphed module was replaced "
                                   "or moved since it was graphed; graph the module again")
        return pytree.tree_unflatten(_Graphed.apply(r, *(flat + r.params)), r.spec)

    return graphed


def _graphed_forward(module, graphed):
    """module.forward's replacement: the graphs while module.training is what
    it was at graphing, else the original forward. It holds the module
    weakly (it is the module's own attribute: a strong reference would make
    a cycle, and the graphs would wait for the cyclic collector)."""
    ref = weakref.ref(module)
    training = module.training
    original = module.forward
    bound = getattr(original, "__self__", None) is module
    plain = original.__func__ if bound else original

    def forward(*args, **kwargs):
        m = ref()
        if m is None:
            raise RuntimeError(f"{_CALL}: the graphed module was freed; its forward cannot run")
        if m.training == training:
            return graphed(*args, **kwargs)
        return plain(m, *args, **kwargs) if bound else plain(*args, **kwargs)

    return forward


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False,
                           pool=None, capture_error_mode="global", enable_annotations=False):
    """Graphed versions of callables (nn.Modules or functions), as
    torch.cuda.make_graphed_callables: each one's forward runs as one rill
    graph inside one autograd node whose backward runs a second graph.

    callables is one callable, with sample_args a tuple of its argument
    tensors, or a tuple of callables in the order they run, with
    sample_args a tuple of such tuples. The sample args (on a rill device;
    their requires_grad as the real inputs' will be) are the graphs' static
    inputs: they must outlive the graphs. Each callable runs
    num_warmup_iters times (forward and backward) on a side stream, then the
    forwards are captured in order and the backwards in reverse order.
    allow_unused_input lets an input that does not reach the outputs have
    no gradient; pool is a graph_pool_handle() or a graph's pool() for
    them all (rill gives each graph memory of its own; see
    graph_pool_handle); capture_error_mode is torch.rill.graph's.

    A module is returned with its forward replaced: the graphs run while
    module.training is what it was here, the original forward otherwise. A
    function is returned as a new function. Graphed callables take their
    sample args' tensors (same shapes and dtypes) positionally; their
    outputs and their inputs' gradients are the graphs' static tensors,
    overwritten by the next replay. Modules must have no hooks now (they
    may after), only parameters may require grad, and parameters must not
    be replaced afterwards."""
    if enable_annotations:
        raise ValueError(f"{_CALL}: enable_annotations=True is CUDA's kernel annotations, which "
                         "rill's graphs do not have; leave it False")
    if torch.is_autocast_enabled(_rill._TYPE) and torch.is_autocast_cache_enabled():
        raise RuntimeError(f"{_CALL}: autocast's cache is on; use autocast with "
                           "cache_enabled=False")
    if capture_error_mode not in _rill._CAPTURE_MODES:
        raise ValueError(f"{_CALL}: capture_error_mode must be one of "
                         f"{_rill._CAPTURE_MODES}, not {capture_error_mode!r}")
    if not isinstance(num_warmup_iters, int) or num_warmup_iters < 0:
        raise ValueError(f"{_CALL}: num_warmup_iters must be an int of 0 or more, not "
                         f"{num_warmup_iters!r}")
    if pool is not None and not (isinstance(pool, tuple) and len(pool) == 2
                                 and all(isinstance(x, int) for x in pool)):
        raise TypeError(f"{_CALL}: pool must be a graph_pool_handle() or a graph's pool(), a "
                        f"pair of ints, not {pool!r}")
    one = not isinstance(callables, tuple)
    if one:
        callables, sample_args = (callables,), (sample_args,)
    elif not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise TypeError(f"{_CALL}: with a tuple of {len(callables)} callables, sample_args must "
                        "be a tuple of as many tuples of tensors")
    flats = [_check_callable(i, fn, args)
             for i, (fn, args) in enumerate(zip(callables, sample_args))]
    devices = {a.device for flat in flats for a in flat}
    devices |= {p.device for fn in callables if isinstance(fn, torch.nn.Module)
                for p in fn.parameters()}
    if len(devices) > 1:
        raise ValueError(f"{_CALL}: the sample args and parameters are on several devices "
                         f"({', '.join(sorted(map(str, devices)))}); graph them on one")
    index = next(iter(devices)).index if devices else _rill.current_device()

    captured = [_Captured(fn, tuple(args), flat,
                          tuple(fn.parameters()) if isinstance(fn, torch.nn.Module) else ())
                for fn, args, flat in zip(callables, sample_args, flats)]
    with _rill.device(index):
        pool = _rill.graph_pool_handle() if pool is None else pool
        # One side stream for the warm-up and every capture.
        side = _rill.Stream()
        _rill.synchronize()
        side.wait_stream(_rill.current_stream())
        with _rill.stream(side):
            for c in captured:
                c.warm_up(num_warmup_iters, allow_unused_input)
        _rill.synchronize()
        # Forwards in the order they run, then backwards in reverse order.
        for c in captured:
            c.capture_forward(side, pool, capture_error_mode)
        for c in reversed(captured):
            c.capture_backward(side, pool, capture_error_mode, allow_unused_input)
    results = []
    for c in captured:
        graphed = _graphed_function(_Replay(c))
        if isinstance(c.fn, torch.nn.Module):
            c.fn.forward = _graphed_forward(c.fn, graphed)
            results.append(c.fn)
        else:
            results.append(graphed)
    return results[0] if one else tuple(results)
