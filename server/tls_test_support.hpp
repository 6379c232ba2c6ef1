// Test-only: makes throwaway certificate authorities and server certificates with the
// `openssl` command-line tool (scripts/install_deps.sh installs it). Header-only so unit and
// integration tests can share it without a library.
//
//   std::string dir = ic::test::make_temp_dir("tls");
//   ASSERT_TRUE(ic::server::testing::make_ca(dir, "ca1"));
//   ASSERT_TRUE(ic::server::testing::make_server_cert(dir, "ca1", "server"));
//   // dir/ca1.crt, dir/server.crt, dir/server.key
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ic::server::testing {

/// Runs a shell command quietly; true when it exited 0.
inline bool run_quiet(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

/// Returns true when the `openssl` tool can be run.
inline bool have_openssl() { return run_quiet("openssl version"); }

/// Creates a self-signed CA `dir/<name>.crt` + `dir/<name>.key` (EC P-256, valid 1 day).
inline bool make_ca(const std::string& dir, const std::string& name) {
  return run_quiet("cd '" + dir + "' && openssl req -x509 -newkey ec -pkeyopt " +
                   "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj '/CN=" + name +
                   " test CA' -keyout " + name + ".key -out " + name + ".crt -addext " +
                   "basicConstraints=critical,CA:TRUE -addext " +
                   "keyUsage=critical,keyCertSign,cRLSign");
}

/// Creates `dir/<name>.crt` + `dir/<name>.key` for localhost and 127.0.0.1, signed by CA
/// `ca` of the same folder.
inline bool make_server_cert(const std::string& dir, const std::string& ca,
                             const std::string& name) {
  {
    std::ofstream ext(dir + "/" + name + ".ext");
    ext << "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
           "basicConstraints=CA:FALSE\n"
           "keyUsage=critical,digitalSignature\n"
           "extendedKeyUsage=serverAuth\n";
  }
  return run_quiet("cd '" + dir + "' && openssl req -newkey ec -pkeyopt " +
                   "ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost -keyout " + name +
                   ".key -out " + name + ".csr") &&
         run_quiet("cd '" + dir + "' && openssl x509 -req -in " + name + ".csr -CA " + ca +
                   ".crt -CAkey " + ca + ".key -CAcreateserial -days 1 -out " + name +
                   ".crt -extfile " + name + ".ext");
}

/// Returns a file's whole content ("" when unreadable).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Replaces `path` with `content` atomically (write a sibling, then rename over).
inline bool replace_file(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace ic::server::testing
