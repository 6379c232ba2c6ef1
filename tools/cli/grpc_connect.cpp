#include "tools/cli/grpc_connect.hpp"

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

namespace ic::tools {

bool read_file(const std::string& path, std::string* out, std::string* err) {
  if (path == "-") {
    out->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *err = "cannot read " + path;
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::shared_ptr<grpc::Channel> make_channel(const connect_options& opts, std::string* err) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (opts.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!opts.ca_file.empty() && !read_file(opts.ca_file, &ssl.pem_root_certs, err)) return nullptr;
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  return grpc::CreateCustomChannel(opts.addr, creds, args);
}

}  // namespace ic::tools
