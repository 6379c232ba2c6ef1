// Where a test finds the repository's files and the executables it starts, at run time.
//
// CMake writes `<test executable>.paths` next to every ic_test() executable (cmake/helpers.cmake):
// one `key=value` line each for `source_dir`, `shared_dir` and every target the test names in
// `ic_test(... STARTS ...)`. Reading it here, instead of baking the paths into the objects as
// compile definitions, keeps the objects free of absolute paths, so a clone at any path hits
// ccache (CCACHE_BASEDIR); and it works the same under ctest and run by hand from any folder
// (the file is found next to /proc/self/exe).
//
//   std::ifstream in(ic::test::source_dir() + "/deploy/policy.sample.json");
//   auto s = server_process::start(ic::test::executable("inferencecache-server"), {...});
#pragma once

#include <string>
#include <string_view>

namespace ic::test {

/// The repository root the test was built from (CMAKE_SOURCE_DIR).
const std::string& source_dir();

/// The shared/ folder (CMake variable IC_SHARED_DIR); tests skip file-based checks without it.
const std::string& shared_dir();

/// Returns the path of the executable CMake target `target` built. Aborts with one line when
/// the test did not name `target` in its `ic_test(... STARTS ...)`: a build mistake.
const char* executable(std::string_view target);

}  // namespace ic::test
