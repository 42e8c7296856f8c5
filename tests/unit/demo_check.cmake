# SPDX-License-Identifier: MIT
# cmake -DRILL=<rill tool> -DCHECK=<trace_check.py> -DOUT=<dir> -P demo_check.cmake
# `rill demo` runs the three ways, agrees with the host, prints the three
# times and the two speedups, and writes a trace with every stream's track,
# the arrows between them, the graph's nodes and the host functions.
set(trace ${OUT}/rill-demo-trace.json)
file(REMOVE ${trace})
execute_process(COMMAND ${RILL} demo --trace ${trace} OUTPUT_VARIABLE out ERROR_VARIABLE err
                RESULT_VARIABLE rc TIMEOUT 120)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "rill demo failed (${rc}):\n${out}${err}")
endif()
foreach(line "eager, one stream +[0-9.]+ ms" "streams \\(decode, [0-9]+ model, postprocess\\) +[0-9.]+ ms"
             "graph of the streams, replayed +[0-9.]+ ms" "speedup of streams over eager: [0-9.]+x"
             "speedup of the graph over eager: [0-9.]+x" "answers of all three agree with the host's"
             "model streams running at once right after: [0-9.]+ of [0-9]+"
             "open it in https://ui.perfetto.dev")
  if(NOT out MATCHES "${line}")
    message(FATAL_ERROR "rill demo: no line matches '${line}' in\n${out}")
  endif()
endforeach()
if(NOT EXISTS /usr/bin/python3)
  return()
endif()
# One model stream per compute unit: request i's model runs on stream i % n,
# 16 requests of 7 matmuls and a sum each.
string(REGEX MATCH "streams \\(decode, ([0-9]+) model" unused "${out}")
set(n ${CMAKE_MATCH_1})
math(EXPR last "${n} - 1")
math(EXPR requests0 "(16 + ${n} - 1) / ${n}")
math(EXPR matmuls0 "7 * ${requests0}")
execute_process(COMMAND /usr/bin/python3 ${CHECK} ${trace}
                        "track=stream main" "track=stream decode" "track=stream model 0"
                        "track=stream model ${last}" "track=stream postprocess"
                        "count=stream decode|host function|16"
                        "count=stream model 0|matmul_f32|${matmuls0}"
                        "count=stream model 0|sum_f32_partial|${requests0}"
                        "flow=stream decode|stream model ${last}"
                        "flow=stream model ${last}|stream postprocess"
                        "slice=stream main|graph launch" "nested=matmul_f32"
                        "host=rill_device_synchronize"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "rill demo's trace: ${out}${err}")
endif()
