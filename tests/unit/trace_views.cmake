# SPDX-License-Identifier: MIT
# cmake -DRILL=<rill tool> -DTRACES=<tests/unit/traces> -DOUT=<dir> -P trace_views.cmake
# `rill trace-summary` and `rill trace-svg` on a trace whose figures are known
# (two streams, an arrow from stream A's k1 to stream B's wait), and on a
# damaged file, which must fail with a sentence that says where.
function(run_rill)
  execute_process(COMMAND ${RILL} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc TIMEOUT 30)
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
  set(rc "${rc}" PARENT_SCOPE)
endfunction()

function(expect what pattern)
  if(NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "trace-summary: ${what}: no match for '${pattern}' in\n${out}${err}")
  endif()
endfunction()

run_rill(trace-summary ${TRACES}/two_streams.json)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "trace-summary failed (${rc}): ${out}${err}")
endif()
expect("span" "7 slices on 4 tracks over 200.0 us")
expect("busy and gaps of A" "stream A +150.0 +75.0% +2 +50.0 0.0 0.0")
expect("busy of B (its wait is not busy)" "stream B +100.0 +50.0% +2 ")
expect("unit 0" "compute unit 0 \\(device 0\\) +200.0 +100.0%")
expect("overlap" "some stream busy 200.0 us; two or more at once 50.0 us \\(25% of the busy time\\)")
expect("critical path length" "critical path: 200.0 us of work in a 200.0 us trace")
expect("critical path through the arrow" "stream A +k1 +100.0 us\n +stream B +k3 +100.0 us")

run_rill(trace-svg ${TRACES}/two_streams.json ${OUT}/two_streams.svg)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "trace-svg failed (${rc}): ${out}${err}")
endif()
file(READ ${OUT}/two_streams.svg svg)
foreach(piece "<svg " "stream A" "compute unit 1 \\(device 0\\)" "<title>k3 \\(100.0 us\\)</title>"
              "<line " "</svg>")
  if(NOT svg MATCHES "${piece}")
    message(FATAL_ERROR "trace-svg: '${piece}' is missing from ${OUT}/two_streams.svg")
  endif()
endforeach()

run_rill(trace-summary ${TRACES}/damaged.json)
if(rc STREQUAL "0" OR NOT err MATCHES "is not valid JSON \\(the file ends inside a string at line 11")
  message(FATAL_ERROR "trace-summary on a damaged file: status ${rc}, stderr: ${err}")
endif()
run_rill(trace-svg ${TRACES}/damaged.json ${OUT}/damaged.svg)
if(rc STREQUAL "0" OR NOT err MATCHES "is not a trace that rill can read")
  message(FATAL_ERROR "trace-svg on a damaged file: status ${rc}, stderr: ${err}")
endif()
run_rill(trace-summary ${TRACES}/no-such-trace.json)
if(rc STREQUAL "0" OR NOT err MATCHES "cannot open")
  message(FATAL_ERROR "trace-summary on a missing file: status ${rc}, stderr: ${err}")
endif()
