# SPDX-License-Identifier: MIT
# Runs PROGRAM (with RILL_SANITIZE=abort from the test's environment) and
# passes when the stream sanitizer reported seed 000's race, named the
# launching line and aborted there.
execute_process(COMMAND ${PROGRAM} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR rc EQUAL 1 OR rc EQUAL 2)
  message(FATAL_ERROR "the program ended with ${rc} instead of aborting:\n${out}\n${err}")
endif()
foreach(want "rill sanitizer: race between streams on bytes"
             "  kernel 'sum_f32_partial' on stream 's' \\(command 1\\) reads them, at [^\n]*sanitize_abort.c:22"
             "  kernel 'matmul_f32' on stream 'default' \\(command [0-9]+\\) writes them"
             "rill sanitizer: aborting at the first report \\(RILL_SANITIZE=abort\\)")
  if(NOT err MATCHES "${want}")
    message(FATAL_ERROR "expected '${want}' on stderr, got:\n${err}")
  endif()
endforeach()
if(out MATCHES "not caught")
  message(FATAL_ERROR "the program went on after the race:\n${out}")
endif()
