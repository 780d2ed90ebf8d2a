# Fails when a filter of a test binary's batched sweeps (tests/CMakeLists.txt,
# ${dir}_BATCHED) selects no test: a renamed suite would otherwise turn its batch into a
# ctest test that passes while running nothing.
#   cmake -DBINARY=<test binary> "-DFILTERS=<f1>|<f2>..." -Ddir=<folder> -P batched_filters_check.cmake
string(REPLACE "|" ";" filters "${FILTERS}")
foreach(filter IN LISTS filters)
  execute_process(COMMAND ${BINARY} --gtest_list_tests --gtest_filter=${filter}
                  OUTPUT_VARIABLE listed RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${BINARY} --gtest_list_tests --gtest_filter=${filter} exited ${rc}")
  endif()
  # Test names are listed indented under their suite's line.
  string(REGEX MATCHALL "\n  [^\n]+" cases "${listed}")
  list(LENGTH cases count)
  if(count EQUAL 0)
    message(FATAL_ERROR "the batched filter '${filter}' selects no test of ${BINARY}: "
                        "a suite was renamed; update ${dir}_BATCHED in tests/CMakeLists.txt")
  endif()
  message(STATUS "${filter}: ${count} tests")
endforeach()
