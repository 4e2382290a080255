# SPDX-License-Identifier: Apache-2.0
# fs_deb_cudart(MAJOR MINOR OUT): the Depends clause for the CUDA runtime
# that libforesight-kernels links (CUDA::cudart, libcudart.so.MAJOR):
# NVIDIA's package (cuda-cudart-MAJOR-MINOR) or Debian's and Ubuntu's
# (libcudart11.0 for every 11.x, libcudartMAJOR from 12 on).  Included by
# the top CMakeLists.txt; tests/deb_test.sh checks it with cmake -P.
function(fs_deb_cudart major minor out)
  if(major EQUAL 11)
    set(distro libcudart11.0)
  else()
    set(distro libcudart${major})
  endif()
  set(${out} "cuda-cudart-${major}-${minor} | ${distro}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED FS_DEB_CUDART_TEST)
  # cmake -DFS_DEB_CUDART_TEST=12.4 -P cudart.cmake: prints the clause.
  string(REPLACE "." ";" v "${FS_DEB_CUDART_TEST}")
  list(GET v 0 major)
  list(GET v 1 minor)
  fs_deb_cudart(${major} ${minor} clause)
  message("${clause}")
endif()
