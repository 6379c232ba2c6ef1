# ic_component(<target> SOURCES ... [DEPS ...]): one static library per component folder,
# warnings on, includes relative to the repository root.
function(ic_component target)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${target} STATIC ${A_SOURCES})
  target_include_directories(${target} PUBLIC "${CMAKE_SOURCE_DIR}")
  target_link_libraries(${target} PUBLIC ${A_DEPS})
  ic_warnings(${target})
endfunction()

# ic_warnings(<target>): the project's warning set for its own code.
function(ic_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
endfunction()

# ic_test(<name> SOURCES ... [DEPS ...] [LABELS ...] [STARTS <executable targets>]): a
# GoogleTest executable whose tests ctest discovers when it runs them (not at build time).
# STARTS: the project's executables the test runs (built before it).
#
# Paths reach the test at run time, never as compile definitions: `<executable>.paths` next
# to it holds source_dir, shared_dir and `<target>=<path>` per STARTS target, read by
# tests/support/test_paths.hpp. An absolute path compiled into an object would make every
# clone at another path miss ccache for that object (docs/benchmarks.md, "ccache at any path").
function(ic_test name)
  if(NOT IC_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;LABELS;STARTS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} ic_test_paths GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE "${CMAKE_SOURCE_DIR}")
  set(paths "source_dir=${CMAKE_SOURCE_DIR}\nshared_dir=${IC_SHARED_DIR}\n")
  foreach(started ${A_STARTS})
    string(APPEND paths "${started}=$<TARGET_FILE:${started}>\n")
  endforeach()
  file(GENERATE OUTPUT "$<TARGET_FILE:${name}>.paths" CONTENT "${paths}")
  if(A_STARTS)
    add_dependencies(${name} ${A_STARTS})
  endif()
  ic_warnings(${name})
  set(labels unit)
  if(A_LABELS)
    set(labels ${A_LABELS})
  endif()
  # One label string ("integration/tsan"): gtest_discover_tests flattens a list value in
  # PROPERTIES, so LABELS "integration;tsan" kept only the first label and `ctest -L tsan`
  # selected nothing. ctest -L matches labels as a regex search: -L tsan and -L integration
  # both select "integration/tsan".
  list(JOIN labels "/" label)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${label}")
  set_property(GLOBAL APPEND PROPERTY IC_TESTS ${name})
endfunction()

# ic_benchmark(<name> SOURCES ... [DEPS ...]): a Google Benchmark program (not run by ctest).
function(ic_benchmark name)
  if(NOT IC_BUILD_BENCHMARKS)
    return()
  endif()
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} benchmark::benchmark)
  target_include_directories(${name} PRIVATE "${CMAKE_SOURCE_DIR}")
  ic_warnings(${name})
endfunction()
