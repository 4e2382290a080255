# SPDX-License-Identifier: Apache-2.0
# cmake -DSCDOC=... -DSRC=page.scd -DOUT=page.N -DVERSION=... [-DFORESIGHTD=...] [-DFSCTL=...] -P build_man.cmake
#
# One man page: @VERSION@ and the generated lists (@CONFIG_REFERENCE@ from
# `foresightd --config-reference=json`, @OPTIONS_REFERENCE@ from
# `--config-reference=flags`, @COUNTERS_REFERENCE@ from `fsctl counters
# --scdoc`) filled into SRC, then scdoc to OUT (roff) and
# gzip -9n to OUT.gz (what is installed).  OUT.scd keeps the filled source.
cmake_minimum_required(VERSION 3.25) # CMP0053: "@VERSION@" is text, not a variable
file(READ "${SRC}" text)
string(REPLACE "@VERSION@" "${VERSION}" text "${text}")
foreach(pair "CONFIG_REFERENCE=json" "OPTIONS_REFERENCE=flags")
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 var)
  list(GET pair 1 mode)
  if(text MATCHES "@${var}@")
    if(NOT FORESIGHTD)
      message(FATAL_ERROR "${SRC}: @${var}@ needs -DFORESIGHTD")
    endif()
    execute_process(COMMAND "${FORESIGHTD}" --config-reference=${mode}
      OUTPUT_VARIABLE ref RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0 OR ref STREQUAL "")
      message(FATAL_ERROR "${FORESIGHTD} --config-reference=${mode} failed (${rc}): ${err}")
    endif()
    string(STRIP "${ref}" ref)
    string(REPLACE "@${var}@" "${ref}" text "${text}")
  endif()
endforeach()
if(text MATCHES "@COUNTERS_REFERENCE@")
  if(NOT FSCTL)
    message(FATAL_ERROR "${SRC}: @COUNTERS_REFERENCE@ needs -DFSCTL")
  endif()
  execute_process(COMMAND "${FSCTL}" counters --scdoc OUTPUT_VARIABLE ref RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR ref STREQUAL "")
    message(FATAL_ERROR "${FSCTL} counters --scdoc failed (${rc}): ${err}")
  endif()
  string(STRIP "${ref}" ref)
  string(REPLACE "@COUNTERS_REFERENCE@" "${ref}" text "${text}")
endif()
file(WRITE "${OUT}.scd" "${text}")
execute_process(COMMAND "${SCDOC}" INPUT_FILE "${OUT}.scd" OUTPUT_FILE "${OUT}" RESULT_VARIABLE rc
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  file(REMOVE "${OUT}")
  message(FATAL_ERROR "scdoc ${SRC}: ${err}")
endif()
execute_process(COMMAND gzip -9nf -k "${OUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip ${OUT} failed")
endif()
