# SPDX-License-Identifier: MIT
"""Errors: one exception class per rill status, derived from RillError,
carrying rill_last_error()'s sentence."""

import pytest

import rill
from rill import _errors
from rill._ffi import ffi, lib


def _status_names():
    names = {}
    for status in range(lib.RILL_ERROR_INVALID_ARGUMENT, lib.RILL_ERROR_INTERNAL + 1):
        names[status] = ffi.string(lib.rill_status_name(status)).decode()
    return names


def test_every_error_status_has_its_own_class_derived_from_rill_error():
    classes = set()
    for status, name in _status_names().items():
        cls = _errors.ERRORS[status]
        assert issubclass(cls, rill.RillError)
        assert issubclass(cls, RuntimeError)
        assert cls.status == status and cls.status_name == name
        assert getattr(rill, cls.__name__) is cls
        classes.add(cls)
    assert len(classes) == lib.RILL_ERROR_INTERNAL - 1


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


def test_unknown_status_becomes_internal_error():
    exc = _errors.error(1000, "x")
    assert isinstance(exc, rill.InternalError)
    assert "1000" in str(exc)


def test_not_ready_and_ok_are_not_errors():
    _errors.check(lib.RILL_OK)
    assert lib.RILL_NOT_READY not in _errors.ERRORS
