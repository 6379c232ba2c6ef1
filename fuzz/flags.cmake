# Sanitizer flags for every target of a fuzz build (-DIC_BUILD_FUZZERS=ON, clang only; see
# fuzz/README.md). Included from the root CMakeLists.txt before any component, so the plain
# libraries the fuzz targets link are instrumented (coverage for libFuzzer, ASan, UBSan).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "IC_BUILD_FUZZERS needs clang (configure with CC=clang-16 CXX=clang++-16)")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=address,undefined)
