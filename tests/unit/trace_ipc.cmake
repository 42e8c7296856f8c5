# SPDX-License-Identifier: MIT
# cmake -DEXAMPLE=<ipc_producer_consumer> -DRILL=<rill tool> -DCHECK=<trace_check.py>
#       -DOUT=<dir> -P trace_ipc.cmake
# Two processes that share an interprocess event, each tracing into its own
# file (RILL_TRACE with %p), joined by `rill trace-merge`: the merged trace
# holds an arrow from the producer's record to the consumer's wait.
file(GLOB old ${OUT}/ipc-trace-*.json)
if(old)
  file(REMOVE ${old})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env RILL_TRACE=${OUT}/ipc-trace-%p.json ${EXAMPLE}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc STREQUAL "0" OR NOT out MATCHES "sum of the shared buffer = 3145728")
  message(FATAL_ERROR "the example failed (${rc}):\n${out}${err}")
endif()
file(GLOB traces ${OUT}/ipc-trace-*.json)
list(LENGTH traces n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "RILL_TRACE with %p: ${n} trace files, not one per process: ${traces}")
endif()
execute_process(COMMAND ${RILL} trace-merge ${OUT}/ipc-merged.json ${traces}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 30)
if(NOT rc STREQUAL "0" OR NOT out MATCHES "events of 2 traces")
  message(FATAL_ERROR "rill trace-merge failed (${rc}):\n${out}${err}")
endif()
execute_process(COMMAND /usr/bin/python3 ${CHECK} ${OUT}/ipc-merged.json xflow
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 30)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "the merged trace lacks the arrow between the processes:\n${out}${err}")
endif()
execute_process(COMMAND ${RILL} trace-merge ${OUT}/ipc-merged.json ${OUT}/no-such-trace.json
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 30)
if(rc STREQUAL "0" OR NOT err MATCHES "cannot open")
  message(FATAL_ERROR "rill trace-merge of a missing file: status ${rc}, stderr: ${err}")
endif()
file(REMOVE ${traces} ${OUT}/ipc-merged.json)
