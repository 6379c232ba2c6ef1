// Channel construction shared by the CLI verbs: --addr, --tls, --ca-file.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>

namespace ic::tools {

/// How to reach the gRPC port.
struct connect_options {
  std::string addr = "127.0.0.1:9090";  ///< host:port of the gRPC listener
  bool tls = false;                     ///< use TLS (system roots unless ca_file is set)
  std::string ca_file;                  ///< PEM root certificates for --tls; default none
};

/// Builds a channel for `opts`; nullptr and `*err` when the CA file cannot be read.
std::shared_ptr<grpc::Channel> make_channel(const connect_options& opts, std::string* err);

/// Reads a whole file ("-" is stdin); false and `*err` when it cannot be read.
bool read_file(const std::string& path, std::string* out, std::string* err);

}  // namespace ic::tools
