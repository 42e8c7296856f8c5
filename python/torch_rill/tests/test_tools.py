# SPDX-License-Identifier: MIT
"""Seeing what ran: rill's trace names each command after the aten op that
submitted it, and the stream sanitizer reports a missing wait in a PyTorch
program naming both ops and both streams. Each runs in a child process
with RILL_TRACE or RILL_SANITIZE in its environment, as a user sets them."""

import json
import os
import subprocess
import sys
import textwrap

import torch


def run_child(code, **env):
    """Runs code in a child interpreter with this one's environment and env."""
    child_env = dict(os.environ, **env)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def test_naming_is_off_unless_asked():
    assert not torch.rill.naming_ops()
    torch.rill.name_ops(True)
    try:
        assert torch.rill.naming_ops()
        x = torch.ones(4, device="rill")
        assert (x + x).cpu().tolist() == [2.0] * 4
    finally:
        torch.rill.name_ops(False)
    assert not torch.rill.naming_ops()


def test_trace_names_commands_after_aten_ops(tmp_path):
    path = tmp_path / "trace.json"
    run_child("""
        import torch, torch_rill
        assert torch.rill.naming_ops()
        x = torch.randn(64, 64, device="rill")
        y = x + x
        z = y @ x
        torch.rill.synchronize()
    """, RILL_TRACE=str(path))
    with open(path, encoding="utf-8") as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {e.get("name", "") for e in events if e.get("ph") == "X"}
    assert any(n.startswith("aten::add (") for n in names), sorted(names)
    assert any(n.startswith("aten::mm (") for n in names), sorted(names)


def test_sanitizer_names_the_ops_and_streams_of_a_missing_wait():
    done = run_child("""
        import torch, torch_rill
        x = torch.randn(128, 128, device="rill")
        torch.rill.synchronize()
        side = torch.rill.Stream()
        with torch.rill.stream(side):
            y = x @ x                 # written on the side stream
        total = y.sum()               # read on the default stream: no wait
        torch.rill.synchronize()
    """, RILL_SANITIZE="1")
    err = done.stderr
    assert "rill sanitizer: race between streams" in err, err
    assert "of aten::mm on stream" in err and "of aten::sum on stream" in err, err
    assert err.count("rill sanitizer: ") == 1, err
    # The correct program, with the wait, is clean.
    done = run_child("""
        import torch, torch_rill
        x = torch.randn(128, 128, device="rill")
        torch.rill.synchronize()
        side = torch.rill.Stream()
        with torch.rill.stream(side):
            y = x @ x
        torch.rill.current_stream().wait_stream(side)
        total = y.sum()
        torch.rill.synchronize()
    """, RILL_SANITIZE="1")
    assert "rill sanitizer" not in done.stderr, done.stderr
