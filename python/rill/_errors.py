# SPDX-License-Identifier: MIT
"""One exception class per rill_status but RILL_OK, all derived from
RillError (a RuntimeError, as the frameworks' runtime failures are). Each
carries the sentence of rill_last_error() that the failing call left (or
rill_status_string's, where the call left none), its status number and its
status name. InvalidArgumentError is also a ValueError, OutOfMemoryError a
MemoryError. RILL_NOT_READY is no failure to rill, and query() answers False
for it; NotReadyError is for the calls that need the work done
(elapsed_time)."""

import re

from ._ffi import ffi, lib, library_path


class RillError(RuntimeError):
    """A rill call failed. `status` is the rill_status number, `status_name`
    its name ("RILL_ERROR_KERNEL_FAILED"), and the message is the sentence of
    rill_last_error(): what went wrong and what to do about it."""

    status = None
    status_name = None

    def __init__(self, message):
        super().__init__(message)


class NotReadyError(RillError):
    """The work is still pending where the call needs it completed, e.g.
    elapsed_time of events whose work has not completed."""


class InvalidArgumentError(RillError, ValueError):
    """An argument is invalid: a destroyed or closed handle, a size of zero, ..."""


class OutOfMemoryError(RillError, MemoryError):
    """Out of device memory: the pool cannot serve the request, even from its
    emptied cache, within the device's limit (set_memory_limit) or its memory
    (for the CPU devices, what rill may take of the machine's,
    Device.memory_bytes; RILL_CPU_MEMORY sets it). The message gives the
    pool's figures. Also a MemoryError, so that code that handles running
    out of memory catches it."""


class NoDeviceError(RillError):
    """No such device, or its backend is not available here."""


class DeviceMismatchError(RillError):
    """The objects belong to different devices."""


class NotSupportedError(RillError):
    """The device or this build lacks the feature."""


class NotPermittedError(RillError):
    """Not permitted here, e.g. a blocking call from inside a host function."""


class TimingDisabledError(RillError):
    """elapsed_time of an event created without enable_timing=True."""


class NotRecordedError(RillError):
    """elapsed_time of an event that was never recorded."""


class KernelFailedError(RillError):
    """A kernel or host function failed; the stream skips its later work until
    clear_error(). When the failure is a Python host function's exception,
    `python_traceback` holds its whole traceback text (also in the message)
    and __cause__ is the exception itself."""

    python_traceback = None


class CaptureUnsupportedError(RillError):
    """The call is not allowed while a capture is active; the capture is invalidated."""


class CaptureInvalidatedError(RillError):
    """The capture was invalidated by an unsupported call or a destroyed stream."""


class CaptureUnjoinedError(RillError):
    """A stream forked into the capture was not joined back to the origin stream."""


class CaptureUnmatchedError(RillError):
    """The stream is not the origin of its capture."""


class CaptureIsolationError(RillError):
    """A dependency links captured and uncaptured work, or two captures."""


class CaptureWrongThreadError(RillError):
    """The capture was ended from another thread than the one that began it."""


class IpcError(RillError):
    """An inter-process handle could not be exported or opened."""


class InternalError(RillError):
    """An internal error occurred in rill."""


class DeviceLostError(RillError):
    """The device failed as a whole (a GPU fault ended its context): every
    stream of it fails; only rill.shutdown() and a new runtime recover."""


# rill_status name -> class; every status but RILL_OK.
_BY_NAME = {
    "RILL_NOT_READY": NotReadyError,
    "RILL_ERROR_INVALID_ARGUMENT": InvalidArgumentError,
    "RILL_ERROR_OUT_OF_MEMORY": OutOfMemoryError,
    "RILL_ERROR_NO_DEVICE": NoDeviceError,
    "RILL_ERROR_DEVICE_MISMATCH": DeviceMismatchError,
    "RILL_ERROR_NOT_SUPPORTED": NotSupportedError,
    "RILL_ERROR_NOT_PERMITTED": NotPermittedError,
    "RILL_ERROR_TIMING_DISABLED": TimingDisabledError,
    "RILL_ERROR_NOT_RECORDED": NotRecordedError,
    "RILL_ERROR_KERNEL_FAILED": KernelFailedError,
    "RILL_ERROR_CAPTURE_UNSUPPORTED": CaptureUnsupportedError,
    "RILL_ERROR_CAPTURE_INVALIDATED": CaptureInvalidatedError,
    "RILL_ERROR_CAPTURE_UNJOINED": CaptureUnjoinedError,
    "RILL_ERROR_CAPTURE_UNMATCHED": CaptureUnmatchedError,
    "RILL_ERROR_CAPTURE_ISOLATION": CaptureIsolationError,
    "RILL_ERROR_CAPTURE_WRONG_THREAD": CaptureWrongThreadError,
    "RILL_ERROR_IPC": IpcError,
    "RILL_ERROR_INTERNAL": InternalError,
    "RILL_ERROR_DEVICE_LOST": DeviceLostError,
}

for _cls in (RillError, *_BY_NAME.values()):
    _cls.__module__ = "rill"

# status number -> class, from the library's own names.
ERRORS = {}
for _name, _cls in _BY_NAME.items():
    _status = getattr(lib, _name)
    if ffi.string(lib.rill_status_name(_status)).decode() != _name:
        raise ImportError(f"rill: librill.so names status {_status} "
                          f"{ffi.string(lib.rill_status_name(_status)).decode()}, not {_name}; "
                          "the package and the library are of different versions")
    _cls.status = _status
    _cls.status_name = _name
    ERRORS[_status] = _cls
del _name, _cls, _status

# Python tracebacks of host functions that raised, by number, for the
# KernelFailedError that reports them (the C sentence carries the number).
_TRACEBACKS = {}
_TRACEBACKS_KEPT = 64
_TRACEBACK_MARK = re.compile(r"Python exception #(\d+)")


def remember_traceback(number, text, exc):
    _TRACEBACKS[number] = (text, exc)
    while len(_TRACEBACKS) > _TRACEBACKS_KEPT:
        del _TRACEBACKS[next(iter(_TRACEBACKS))]


def _status_string(status):
    return ffi.string(lib.rill_status_string(status)).decode("utf-8", "replace")


def error(status, message=None):
    """The exception for a failed call: its class by status, its message
    the thread's rill_last_error() sentence unless one is given, or where
    the call left none (RILL_NOT_READY sets none), rill_status_string's."""
    if message is None and status != lib.RILL_NOT_READY:
        message = ffi.string(lib.rill_last_error()).decode("utf-8", "replace")
    if not message:
        message = _status_string(status)
    cls = ERRORS.get(status)
    if cls is None:
        cls = InternalError
        name = ffi.string(lib.rill_status_name(status)).decode("utf-8", "replace")
        message = (f"unknown rill status {status} ({name}): {message}; the package and "
                   f"librill.so ({library_path}) are of different versions, install them "
                   "from one build")
    exc = cls(message)
    if cls is KernelFailedError:
        match = _TRACEBACK_MARK.search(message)
        kept = _TRACEBACKS.get(int(match.group(1))) if match else None
        if kept is not None:
            text, cause = kept
            exc = cls(f"{message}\n\nThe host function's Python traceback:\n{text.rstrip()}")
            exc.python_traceback = text
            exc.__cause__ = cause
    return exc


def check(status):
    """Raises the exception for status unless it is RILL_OK."""
    if status != 0:
        raise error(status)
