# Use ccache when it is installed: a clean clone on the same machine then rebuilds mostly
# from cache. Disable with -DIC_USE_CCACHE=OFF.
option(IC_USE_CCACHE "Compile through ccache when available" ON)
if(IC_USE_CCACHE)
  find_program(CCACHE_PROGRAM ccache)
  if(CCACHE_PROGRAM)
    # CCACHE_BASEDIR makes paths relative, so a fresh clone in another folder (CI) hits the
    # cache filled by an earlier build of the same sources.
    set(launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
        ${CCACHE_PROGRAM})
    set(CMAKE_C_COMPILER_LAUNCHER ${launcher})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${launcher})
    message(STATUS "ccache: ${CCACHE_PROGRAM}")
  endif()
endif()
