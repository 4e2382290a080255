# SPDX-License-Identifier: Apache-2.0
# ctest engine_bench_smoke: fs-engine-bench on the host backend, small.
#  1. every mode: exit 0, the table prints a row per mode, and every
#     window's checksum is equal across the five modes;
#  2. a run in which one engine corrupts one checksum must fail (exit != 0,
#     CHECKSUM MISMATCH named): the check can fail.
set(SHAPE --daemon ${DAEMON} --layers 6 --experts 32 --topk 4 --expert-bytes 32768 --bus-gbps 2
    --cpu-gbps 0 --budget 0.26 --profile-windows 40 --windows 60 --warm 10 --dense-us 50
    --cpu-threads 1 --timeout 120)
execute_process(COMMAND ${BENCH} run ${SHAPE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fs-engine-bench run exited ${rc}:\n${err}")
endif()
if(NOT out MATCHES "\\| mode \\| tokens/s \\| hit rate")
  message(FATAL_ERROR "no table header in the output")
endif()
foreach(m baseline recency predict both zero)
  if(NOT out MATCHES "\\| ${m} \\| [0-9.]+ \\| [0-9.]+ % \\|")
    message(FATAL_ERROR "no row for mode ${m}")
  endif()
endforeach()
if(NOT out MATCHES "checksums: [1-9][0-9]* window results compared over 5 modes x 1 engine\\(s\\): all equal")
  message(FATAL_ERROR "checksums not compared across the five modes")
endif()

execute_process(COMMAND ${BENCH} run ${SHAPE} --modes baseline,zero --fault zero
  RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2 ERROR_VARIABLE err2)
if(rc2 EQUAL 0 OR NOT err2 MATCHES "CHECKSUM MISMATCH")
  message(FATAL_ERROR "a corrupted checksum was not caught (exit ${rc2}):\n${out2}\n${err2}")
endif()
message("a corrupted checksum fails the run, as it must (exit ${rc2})")

# 3. two engines on one tier, layers split over two (stand-in) cards: the
#    engines decode the same windows in rotated order, so every window's
#    checksum must agree across modes and engines.
execute_process(COMMAND ${BENCH} run ${SHAPE} --cards 2 --engines 2
  RESULT_VARIABLE rc3 OUTPUT_VARIABLE out3 ERROR_VARIABLE err3)
message("${out3}")
if(NOT rc3 EQUAL 0)
  message(FATAL_ERROR "two engines, two cards: exited ${rc3}:\n${err3}")
endif()
if(NOT out3 MATCHES "compared over 5 modes x 2 engine\\(s\\): all equal")
  message(FATAL_ERROR "two engines, two cards: checksums not compared across modes and engines")
endif()
