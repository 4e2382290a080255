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

# 4. data parallel on two stand-in cards (one engine per card, every layer)
#    with the peer path: some uses are served from the other card's slots,
#    and the checksums still agree.
execute_process(COMMAND ${BENCH} run ${SHAPE} --cards 2 --engines 2 --placement dp --modes baseline,recency,zero
  RESULT_VARIABLE rc4 OUTPUT_VARIABLE out4 ERROR_VARIABLE err4)
message("${out4}")
if(NOT rc4 EQUAL 0)
  message(FATAL_ERROR "data parallel, peer path: exited ${rc4}:\n${err4}")
endif()
if(NOT out4 MATCHES "\\| recency \\| [0-9.]+ \\| [0-9.]+ % \\([0-9.]+ % peer\\)")
  message(FATAL_ERROR "data parallel, peer path: no use was served from the other card")
endif()
if(NOT out4 MATCHES "compared over 3 modes x 2 engine\\(s\\): all equal")
  message(FATAL_ERROR "data parallel, peer path: checksums not compared")
endif()

# 5. the router-ahead predictor (the kernel's CPU reference on the host
#    device): it posts, its recall is measured and printed, checksums agree.
execute_process(COMMAND ${BENCH} run ${SHAPE} --predictor kernel --ra-dim 64 --modes baseline,predict,zero
  RESULT_VARIABLE rc5 OUTPUT_VARIABLE out5 ERROR_VARIABLE err5)
message("${out5}")
if(NOT rc5 EQUAL 0)
  message(FATAL_ERROR "router-ahead predictor: exited ${rc5}:\n${err5}")
endif()
if(NOT out5 MATCHES "mode=predict [^\n]* ra_launches=[1-9]")
  message(FATAL_ERROR "router-ahead predictor: no launch counted")
endif()
if(NOT out5 MATCHES "measured per-token recall within 10 candidates, 1/2/3 layers ahead: 0\\.[0-9]+")
  message(FATAL_ERROR "router-ahead predictor: no measured recall printed")
endif()
