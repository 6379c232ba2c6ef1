#include "journal/jetstream/nats_connection.hpp"

#include <thread>

namespace ic::journal::jetstream::detail {

std::string describe(natsStatus s, jsErrCode jerr) {
  std::string out = natsStatus_GetText(s);
  if (jerr != 0) out += " (jetstream error " + std::to_string(static_cast<int>(jerr)) + ")";
  natsStatus last = NATS_OK;
  const char* text = nats_GetLastError(&last);
  if (text != nullptr && *text != '\0' && last == s) out += std::string(": ") + text;
  return out;
}

std::int64_t ms_left(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
  return left > 0 ? left : 0;
}

result<std::unique_ptr<connection>> connection::open(const std::vector<std::string>& servers,
                                                     const std::string& name,
                                                     const std::string& creds_file,
                                                     std::chrono::milliseconds timeout) {
  if (servers.empty()) return status{errc::invalid_argument, "no NATS server given"};
  std::unique_ptr<connection> c(new connection());
  std::vector<const char*> urls;
  for (const auto& s : servers) urls.push_back(s.c_str());
  natsStatus s = natsOptions_Create(&c->opts_);
  if (s == NATS_OK) s = natsOptions_SetServers(c->opts_, urls.data(), static_cast<int>(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetNoRandomize(c->opts_, true);
  if (s == NATS_OK) s = natsOptions_SetName(c->opts_, name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(c->opts_, 1000);
  // Reconnect forever: a journal outage is survived, never turned into a closed connection.
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(c->opts_, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(c->opts_, 100);
  if (s == NATS_OK) s = natsOptions_SetClosedCB(c->opts_, &connection::on_closed, c.get());
  if (s == NATS_OK && !creds_file.empty()) {
    s = natsOptions_SetUserCredentialsFromFiles(c->opts_, creds_file.c_str(), nullptr);
    if (s != NATS_OK) {
      return status{errc::invalid_argument,
                    "NATS creds file '" + creds_file + "': " + describe(s)};
    }
  }
  if (s != NATS_OK) return status{errc::internal, "NATS options: " + describe(s)};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    s = natsConnection_Connect(&c->nc_, c->opts_);
    if (s == NATS_OK) break;
    if (ms_left(deadline) == 0) {
      return status{errc::unavailable, "no NATS server of " + servers.front() +
                                           (servers.size() > 1 ? ",..." : "") +
                                           " answered within " +
                                           std::to_string(timeout.count()) + " ms: " +
                                           describe(s)};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  // JetStream API calls (stream info, consumer create) wait up to 10 s, not 5: right after a
  // stream leader change, creating an ordered consumer took 5.2 s and 10.4 s here, and a
  // client-side timeout leaves an orphan consumer behind while the retry makes another.
  jo.Wait = 10000;
  s = natsConnection_JetStream(&c->js_, c->nc_, &jo);
  if (s != NATS_OK) return status{errc::internal, "JetStream context: " + describe(s)};
  return c;
}

void connection::on_closed(natsConnection*, void* self) {
  auto* c = static_cast<connection*>(self);
  std::lock_guard<std::mutex> lock(c->mu_);
  c->closed_ = true;
  c->cv_.notify_all();
}

connection::~connection() {
  if (nc_ != nullptr) {
    natsConnection_Close(nc_);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return closed_; });
  }
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (nc_ != nullptr) natsConnection_Destroy(nc_);
  if (opts_ != nullptr) natsOptions_Destroy(opts_);
}

}  // namespace ic::journal::jetstream::detail
