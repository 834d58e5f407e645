# ctest `include_boundary`: the testkit and the tool include only include/, the standard and
# third-party headers, and each other. Their include roots (CMakeLists.txt) keep src/ off their
# search path; this script rejects the one way around it, a quoted include that climbs out of its
# folder ("../"), and names every offending line.
#   cmake -DLITETOPK_SOURCE_DIR=<repository> -P cmake/check_include_boundary.cmake
file(GLOB_RECURSE sources "${LITETOPK_SOURCE_DIR}/testkit/*" "${LITETOPK_SOURCE_DIR}/tools/*")
set(offences "")
foreach(source ${sources})
  file(STRINGS "${source}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]*\\.\\./")
  foreach(line ${lines})
    file(RELATIVE_PATH name "${LITETOPK_SOURCE_DIR}" "${source}")
    string(APPEND offences "\n  ${name}: ${line}")
  endforeach()
endforeach()
if(offences)
  message(FATAL_ERROR "testkit/ and tools/ must not include across the boundary:${offences}")
endif()
