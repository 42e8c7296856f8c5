# SPDX-License-Identifier: MIT
"""Errors: one exception class per rill status, derived from RillError,
carrying rill_last_error()'s sentence."""

import pytest

import rill
from rill import _errors
from rill._ffi import ffi, lib


def _statuses():
    """Every rill_status of rill.h (test_cdef checks the declarations
    against the header), by value."""
    return sorted(ffi.typeof("rill_status").relements.items(), key=lambda item: item[1])


def test_every_status_walks_through_the_mapping_to_its_class_and_sentence():
    classes = set()
    for name, status in _statuses():
        assert ffi.string(lib.rill_status_name(status)).decode() == name
        if status == lib.RILL_OK:
            assert status not in _errors.ERRORS
            _errors.check(status)  # no exception
            continue
        cls = _errors.ERRORS[status]
        assert issubclass(cls, rill.RillError)
        assert issubclass(cls, RuntimeError)
        assert cls.status == status and cls.status_name == name
        assert getattr(rill, cls.__name__) is cls and cls.__name__ in rill.__all__
        classes.add(cls)
        # With no sentence from the call, the status's own sentence.
        exc = _errors.error(status, "")
        assert type(exc) is cls
        assert str(exc) == ffi.string(lib.rill_status_string(status)).decode()
        with pytest.raises(cls):
            _errors.check(status)
    assert len(classes) == len(_statuses()) - 1


def test_not_ready_does_not_report_an_earlier_call_s_sentence():
    with pytest.raises(rill.InvalidArgumentError):
        rill.Event(enable_timing=True, interprocess=True)  # leaves a sentence
    exc = _errors.error(lib.RILL_NOT_READY)
    assert isinstance(exc, rill.NotReadyError)
    assert "rill_event_create" not in str(exc)
    assert "still pending" in str(exc)


def test_invalid_argument_error_is_also_a_value_error():
    assert issubclass(rill.InvalidArgumentError, ValueError)


def test_error_carries_the_sentence_of_rill_last_error():
    with pytest.raises(rill.InvalidArgumentError) as info:
        rill.Event(enable_timing=True, interprocess=True)  # refused by rill_event_create
    sentence = ffi.string(lib.rill_last_error()).decode()
    assert str(info.value) == sentence
    assert "rill_event_create" in sentence


def test_error_of_c_call_names_the_call_and_what_to_do():
    with pytest.raises(rill.TimingDisabledError) as info:
        a, b = rill.Event(), rill.Event()
        a.record()
        b.record()
        a.elapsed_time(b)
    assert "rill_event_elapsed_ms" in str(info.value)
    assert info.value.status == lib.RILL_ERROR_TIMING_DISABLED


def test_unknown_status_becomes_internal_error_that_says_why():
    exc = _errors.error(1000, "x")
    assert isinstance(exc, rill.InternalError)
    assert "1000" in str(exc) and "different versions" in str(exc)


def test_ok_is_no_error_and_not_ready_raises_only_where_work_must_be_done(gate):
    _errors.check(lib.RILL_OK)
    s = rill.Stream()
    s.launch_host_func(gate)
    assert s.query() is False  # a query answers, it does not raise
    gate.open()
    s.synchronize()


def test_elapsed_time_of_pending_events_says_both_must_be_completed(gate):
    # torch: RuntimeError "Both events must be completed before calculating elapsed time."
    s = rill.Stream()
    start, end = rill.Event(enable_timing=True), rill.Event(enable_timing=True)
    start.record(s)
    s.launch_host_func(gate)
    end.record(s)
    with pytest.raises(RuntimeError) as info:
        start.elapsed_time(end)
    gate.open()
    assert isinstance(info.value, rill.NotReadyError)
    assert info.value.status == lib.RILL_NOT_READY
    assert "both events must be completed" in str(info.value)
    assert "rill.Event.elapsed_time" in str(info.value)
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
