# Use ccache when it is installed: a clean clone on the same machine then rebuilds mostly
# from cache. Disable with -DIC_USE_CCACHE=OFF.
option(IC_USE_CCACHE "Compile through ccache when available" ON)
if(IC_USE_CCACHE)
  find_program(CCACHE_PROGRAM ccache)
  if(CCACHE_PROGRAM)
    set(CMAKE_C_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
    set(CMAKE_CXX_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
    message(STATUS "ccache: ${CCACHE_PROGRAM}")
  endif()
endif()
