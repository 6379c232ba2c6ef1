// gRPC server TLS from a certificate/key file pair that is re-read when it changes
// (spec/operations.md §3.5: one-sided TLS on the gRPC port, reload when the files change, a
// failed reload logs `grpc_tls_reload` and keeps serving the last good pair, TLS >= 1.2).
//
// gRPC 1.51's `FileWatcherCertificateProvider` re-reads files on a timer, but it serves
// whatever it reads: a half-written or mismatched pair replaces the good one, and a missing
// file makes every handshake fail. So the provider never sees the operator's files. This
// class validates the operator's pair itself (both PEMs parse, the key matches the
// certificate) and only then publishes it to two in-memory files (memfd, reached by the
// provider as /proc/self/fd/N) that the provider watches. A pair that does not validate is
// logged once and never published, so the last good one stays in service; no key material is
// written to disk.
//
//   std::string error;
//   auto tls = reloading_tls::create(cert_file, key_file, &error);
//   if (!tls) { log grpc_tls_load error; exit 1; }
//   builder.AddListeningPort(addr, tls->credentials(), &port);
//   ...
//   tls->stop();   // before the gRPC server goes away
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

#include <sys/stat.h>

namespace grpc {
class ServerCredentials;
namespace experimental {
class CertificateProviderInterface;
}  // namespace experimental
}  // namespace grpc

namespace ic::server {

/// How often the operator's files are checked for changes. Default 1 s.
inline constexpr std::chrono::seconds tls_poll_interval{1};
/// How often gRPC's provider re-reads the published pair. Default 1 s.
inline constexpr unsigned int tls_provider_refresh_seconds = 1;

/// A PEM certificate chain and its private key, checked to belong together.
struct tls_keypair {
  std::string cert_chain_pem;
  std::string private_key_pem;
};

/// Reads `cert_file` and `key_file` and checks that the first certificate parses, the key
/// parses and matches it. Returns the pair, or a one-line reason naming the file.
std::variant<tls_keypair, std::string> load_tls_keypair(const std::string& cert_file,
                                                        const std::string& key_file);

/// Server credentials that follow a certificate/key file pair. Thread-safe; stop() is
/// idempotent and also run by the destructor.
class reloading_tls {
 public:
  /// Loads and validates the pair and starts watching it; nullptr with a one-line `error`
  /// when the pair cannot be loaded.
  static std::unique_ptr<reloading_tls> create(const std::string& cert_file,
                                               const std::string& key_file, std::string* error);
  ~reloading_tls();
  reloading_tls(const reloading_tls&) = delete;
  reloading_tls& operator=(const reloading_tls&) = delete;

  /// Returns the credentials to listen with (TLS 1.2 minimum, no client certificate asked).
  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }

  /// Stops watching the files; the last published pair stays in service.
  void stop();

 private:
  /// What identifies one version of a file on disk.
  struct file_version {
    bool exists = false;
    ::dev_t dev = 0;
    ::ino_t ino = 0;
    ::off_t size = 0;
    std::int64_t mtime_ns = 0;
    bool operator==(const file_version& o) const {
      return exists == o.exists && dev == o.dev && ino == o.ino && size == o.size &&
             mtime_ns == o.mtime_ns;
    }
  };
  static file_version version_of(const std::string& path);

  reloading_tls(std::string cert_file, std::string key_file);
  bool publish(const tls_keypair& pair, std::string* error);
  void watch_loop();
  void check_once();

  std::string cert_file_;
  std::string key_file_;
  int cert_fd_ = -1;  ///< memfd holding the published certificate chain
  int key_fd_ = -1;   ///< memfd holding the published private key
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  file_version cert_seen_;
  file_version key_seen_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace ic::server
