#include "server/tls_credentials.hpp"

#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "server/logging.hpp"

namespace ic::server {
namespace {

bool read_whole_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return false;
  *out = ss.str();
  return true;
}

/// Writes `bytes` into a fresh memfd; returns it, or -1.
int memfd_with(const char* name, const std::string& bytes) {
  int fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -1;
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      ::close(fd);
      return -1;
    }
    done += static_cast<std::size_t>(n);
  }
  return fd;
}

std::string fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

}  // namespace

std::variant<tls_keypair, std::string> load_tls_keypair(const std::string& cert_file,
                                                        const std::string& key_file) {
  tls_keypair pair;
  if (!read_whole_file(cert_file, &pair.cert_chain_pem))
    return "cannot read certificate file \"" + cert_file + "\"";
  if (!read_whole_file(key_file, &pair.private_key_pem))
    return "cannot read key file \"" + key_file + "\"";

  BIO* cert_bio = BIO_new_mem_buf(pair.cert_chain_pem.data(),
                                  static_cast<int>(pair.cert_chain_pem.size()));
  X509* cert = cert_bio ? PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(cert_bio);
  if (cert == nullptr) return "no PEM certificate in \"" + cert_file + "\"";

  BIO* key_bio = BIO_new_mem_buf(pair.private_key_pem.data(),
                                 static_cast<int>(pair.private_key_pem.size()));
  // A null passphrase callback with empty user data refuses encrypted keys instead of
  // prompting on the terminal.
  EVP_PKEY* key =
      key_bio ? PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, const_cast<char*>("")) : nullptr;
  BIO_free(key_bio);
  if (key == nullptr) {
    X509_free(cert);
    return "no usable PEM private key in \"" + key_file + "\"";
  }
  const bool match = X509_check_private_key(cert, key) == 1;
  EVP_PKEY_free(key);
  X509_free(cert);
  if (!match)
    return "private key \"" + key_file + "\" does not match certificate \"" + cert_file + "\"";
  return pair;
}

reloading_tls::reloading_tls(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {}

std::unique_ptr<reloading_tls> reloading_tls::create(const std::string& cert_file,
                                                     const std::string& key_file,
                                                     std::string* error) {
  auto fail = [&](std::string why) -> std::unique_ptr<reloading_tls> {
    if (error) *error = std::move(why);
    return nullptr;
  };
  std::unique_ptr<reloading_tls> self(new reloading_tls(cert_file, key_file));
  self->cert_seen_ = version_of(cert_file);
  self->key_seen_ = version_of(key_file);
  auto loaded = load_tls_keypair(cert_file, key_file);
  if (auto* why = std::get_if<std::string>(&loaded)) return fail(*why);
  std::string why;
  if (!self->publish(std::get<tls_keypair>(loaded), &why)) return fail(why);

  // gRPC's core defaults TLS credentials to TLS 1.2 minimum (1.3 maximum), as required.
  self->provider_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      fd_path(self->key_fd_), fd_path(self->cert_fd_), tls_provider_refresh_seconds);
  grpc::experimental::TlsServerCredentialsOptions options(self->provider_);
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  self->credentials_ = grpc::experimental::TlsServerCredentials(options);
  if (!self->credentials_) return fail("gRPC refused the TLS credentials options");
  self->watcher_ = std::thread([p = self.get()] { p->watch_loop(); });
  return self;
}

reloading_tls::~reloading_tls() {
  stop();
  credentials_.reset();
  provider_.reset();
  if (cert_fd_ >= 0) ::close(cert_fd_);
  if (key_fd_ >= 0) ::close(key_fd_);
}

void reloading_tls::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

reloading_tls::file_version reloading_tls::version_of(const std::string& path) {
  file_version v;
  struct ::stat st {};
  if (::stat(path.c_str(), &st) != 0) return v;
  v.exists = true;
  v.dev = st.st_dev;
  v.ino = st.st_ino;
  v.size = st.st_size;
  v.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return v;
}

bool reloading_tls::publish(const tls_keypair& pair, std::string* error) {
  // Fill two new memfds completely, then switch the watched descriptor numbers to them in
  // one dup3 each: the provider opens either the old or the new file, never a partial one.
  int key = memfd_with("ic-grpc-tls-key", pair.private_key_pem);
  int cert = memfd_with("ic-grpc-tls-cert", pair.cert_chain_pem);
  if (key < 0 || cert < 0) {
    if (key >= 0) ::close(key);
    if (cert >= 0) ::close(cert);
    *error = "cannot create in-memory copies of the TLS pair";
    return false;
  }
  if (key_fd_ < 0) {
    key_fd_ = key;
    cert_fd_ = cert;
    return true;
  }
  const bool ok = ::dup3(key, key_fd_, O_CLOEXEC) >= 0 && ::dup3(cert, cert_fd_, O_CLOEXEC) >= 0;
  ::close(key);
  ::close(cert);
  if (!ok) *error = "cannot switch to the new TLS pair";
  return ok;
}

void reloading_tls::watch_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, tls_poll_interval, [this] { return stopping_; })) {
    lock.unlock();
    check_once();
    lock.lock();
  }
}

void reloading_tls::check_once() {
  const file_version cert = version_of(cert_file_);
  const file_version key = version_of(key_file_);
  if (cert == cert_seen_ && key == key_seen_) return;
  // Remember this version whatever the outcome: a bad pair is reported once, not every poll.
  cert_seen_ = cert;
  key_seen_ = key;
  auto loaded = load_tls_keypair(cert_file_, key_file_);
  std::string why;
  if (auto* e = std::get_if<std::string>(&loaded)) {
    why = *e;
  } else if (publish(std::get<tls_keypair>(loaded), &why)) {
    log_event(spdlog::level::info, "grpc_tls_reloaded",
              {{"cert_file", cert_file_}, {"key_file", key_file_}});
    return;
  }
  log_event(spdlog::level::err, "grpc_tls_reload",
            {{"error", why}, {"action", "keeping the last good certificate"}});
}

}  // namespace ic::server
