# SPDX-License-Identifier: MIT
# cmake -DPROGRAM=<exe> -DEXPECTED=<file> -P compare_output.cmake
# cmake -DPROGRAM=<exe> -DEXPECTED_REGEX_FILE=<file> -P compare_output.cmake
# Runs PROGRAM and fails unless it exits with 0 and its standard output is
# byte for byte the content of EXPECTED, or, without its final newline,
# matches the regular expression in EXPECTED_REGEX_FILE (whose surrounding
# whitespace is ignored). Standard error is shown on failure only.
if(NOT DEFINED PROGRAM)
  message(FATAL_ERROR "compare_output.cmake: pass -DPROGRAM=<program to run>")
endif()
execute_process(COMMAND ${PROGRAM} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc
                TIMEOUT 55)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "${PROGRAM} failed (${rc})\n--- stdout:\n${out}--- stderr:\n${err}")
endif()

if(DEFINED EXPECTED)
  file(READ ${EXPECTED} want)
  if(NOT out STREQUAL want)
    message(FATAL_ERROR "${PROGRAM}: output differs from ${EXPECTED}\n"
                        "--- expected:\n${want}--- got:\n${out}--- stderr:\n${err}")
  endif()
elseif(DEFINED EXPECTED_REGEX_FILE)
  file(READ ${EXPECTED_REGEX_FILE} pattern)
  string(STRIP "${pattern}" pattern)
  string(REGEX REPLACE "\n$" "" body "${out}")
  if(NOT out MATCHES "\n$" OR NOT body MATCHES "${pattern}")
    message(FATAL_ERROR "${PROGRAM}: output does not match ${pattern} (from "
                        "${EXPECTED_REGEX_FILE})\n--- got:\n${out}--- stderr:\n${err}")
  endif()
else()
  message(FATAL_ERROR "compare_output.cmake: pass -DEXPECTED=<file> or -DEXPECTED_REGEX_FILE=<file>")
endif()
message("${out}")
