# Every third-party dependency, found once. All come from Debian 12 packages installed by
# scripts/install_deps.sh.
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)                 # FindProtobuf module: protobuf::libprotobuf, protobuf::protoc
find_package(gRPC CONFIG REQUIRED)              # gRPC::grpc++, gRPC::grpc++_reflection, gRPC::grpc_cpp_plugin
find_package(RocksDB CONFIG REQUIRED)           # link RocksDB::rocksdb-shared (RocksDB::rocksdb is static)
find_package(prometheus-cpp CONFIG REQUIRED)    # prometheus-cpp::core, ::pull
find_package(nlohmann_json CONFIG REQUIRED)     # nlohmann_json::nlohmann_json
find_package(CLI11 CONFIG REQUIRED)             # CLI11::CLI11
find_package(spdlog CONFIG REQUIRED)            # spdlog::spdlog
find_package(OpenSSL REQUIRED)                  # OpenSSL::Crypto (SHA-256 for affinity)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)   # PkgConfig::XXHASH
if(IC_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(IC_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# libmicrohttpd (epoll event loop) serves our own HTTP endpoints (server/http_server.*).
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)   # PkgConfig::MHD

# CAF 0.17.6 ships neither a CMake config nor a .pc file: hand-made imported targets.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
add_library(CAF::core SHARED IMPORTED)
set_target_properties(CAF::core PROPERTIES
  IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES Threads::Threads)

# libnats 3.4.1 (JetStream journal, journal/jetstream/): Debian's cnats CMake config
# references an uninstalled static library, so use pkg-config.
pkg_check_modules(NATS REQUIRED IMPORTED_TARGET libnats)      # PkgConfig::NATS
