# SPDX-License-Identifier: MIT
# Installs the build tree into a scratch prefix, then imports the installed
# package there with the tests' interpreter, from outside the source tree and
# without RILL_LIBRARY: it must load the installed librill.so and compute,
# and give the project's version as rill.__version__. Then two files of the
# repository's tests run in place against it (RILL_TEST_INSTALLED=1), as
# check_wheel.sh runs them all against the wheel.
# Run as: cmake -DBUILD_DIR=... -DPYTHON=... -DPYTHON_DIR=... -DVERSION=... -DWORK_DIR=...
#         -DTESTS_DIR=... -P check_install.cmake
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}): ${err}")
endif()
if(IS_ABSOLUTE "${PYTHON_DIR}")
  message(FATAL_ERROR "RILL_PYTHON_INSTALL_DIR is absolute; this check needs it under the prefix")
endif()
set(ENV{PYTHONPATH} "${prefix}/${PYTHON_DIR}")
unset(ENV{RILL_LIBRARY})
set(ENV{PYTHONDONTWRITEBYTECODE} 1)
execute_process(
  COMMAND ${PYTHON} -c
    "import glob, os, rill; assert os.path.realpath(rill.library_path).startswith(os.path.realpath('${prefix}')), rill.library_path; built = glob.glob(os.path.join(os.path.dirname(rill.__file__), '_rill_cffi*.so')); assert rill._ffi.mode == ('api' if built else 'abi'), (rill._ffi.mode, built); fast = glob.glob(os.path.join(os.path.dirname(rill.__file__), '_rill_fast*.so')); assert (rill._ffi.fast is not None) == bool(built and fast), (rill._ffi.fast, fast); assert rill.__version__ == '${VERSION}', rill.__version__; print((rill.ones(2, 2) @ rill.ones(2, 2)).numpy().tolist(), (rill.ones(2) + 1).numpy().tolist(), rill.library_path, rill._ffi.mode)"
  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^\\[\\[2\\.0, 2\\.0\\], \\[2\\.0, 2\\.0\\]\\]")
  message(FATAL_ERROR "the installed package failed (${rc}): ${out}\n${err}")
endif()
message(STATUS "installed package: ${out}")

set(ENV{RILL_TEST_INSTALLED} 1)
set(ENV{RILL_CPU_WORKERS} 4)
execute_process(
  COMMAND ${PYTHON} -m pytest -q -p no:cacheprovider ${TESTS_DIR}/test_package.py
          ${TESTS_DIR}/test_tensors.py
  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
  TIMEOUT 90)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the repository's tests failed against the installed package (${rc}):\n"
                      "${out}\n${err}")
endif()
string(REGEX MATCH "[^\n]*(passed|failed)[^\n]*" summary "${out}")
message(STATUS "the repository's tests against the installed package: ${summary}")
