#include "journal/jetstream/jetstream_log.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "journal/jetstream/nats_connection.hpp"

namespace ic::journal::jetstream {

namespace {

using clock = std::chrono::steady_clock;
using detail::describe;
using detail::ms_left;

constexpr std::int64_t ns_per_s = 1000000000LL;

std::string all_subjects(const options& o) { return o.subject_prefix + ".>"; }
std::string batch_subject(const options& o) { return o.subject_prefix + ".b"; }

// Fetches the stream's info; *missing is set when the stream does not exist.
result<jsStreamInfo*> fetch_info(jsCtx* js, const std::string& stream, bool* missing) {
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&si, js, stream.c_str(), nullptr, &jerr);
  *missing = s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr;
  if (s != NATS_OK) return status{errc::unavailable, "stream " + stream + " info: " + describe(s, jerr)};
  return si;
}

stream_state to_state(const jsStreamInfo* si) {
  stream_state st;
  st.first_seq = si->State.FirstSeq;
  st.last_seq = si->State.LastSeq;
  st.msgs = si->State.Msgs;
  st.bytes = si->State.Bytes;
  st.max_bytes = si->Config->MaxBytes;
  st.replicas = si->Config->Replicas;
  if (si->Cluster != nullptr && si->Cluster->Leader != nullptr) st.leader = si->Cluster->Leader;
  return st;
}

// Refuses an existing stream whose config breaks the journal's rules (spec §3.3, §3.6).
status validate(const jsStreamConfig& c, const options& o) {
  const std::string name = "stream " + o.stream + " exists with ";
  bool has_subject = false;
  for (int i = 0; i < c.SubjectsLen; ++i) has_subject = has_subject || all_subjects(o) == c.Subjects[i];
  if (!has_subject) return {errc::incompatible, name + "other subjects (needs " + all_subjects(o) + ")"};
  if (c.Discard != js_DiscardNew) {
    return {errc::incompatible, name + "discard=old; the journal needs discard=new (never drop "
                                       "records no snapshot covers)"};
  }
  if (c.MaxAge != 0) {
    return {errc::incompatible, name + "max_age=" + std::to_string(c.MaxAge) +
                                    " ns; the journal needs max_age=0 (age races snapshots)"};
  }
  if (c.Replicas != o.replicas) {
    return {errc::incompatible, name + "replicas=" + std::to_string(c.Replicas) +
                                    "; --nats-replicas says " + std::to_string(o.replicas)};
  }
  if (c.Storage != js_FileStorage) return {errc::incompatible, name + "memory storage; needs file"};
  if (c.Retention != js_LimitsPolicy) return {errc::incompatible, name + "a non-limits retention"};
  return {};
}

// Creates the stream or validates the existing one, retrying transient errors (a fresh
// cluster has no meta leader yet) until `deadline`.
result<stream_state> ensure_stream(jsCtx* js, const options& o, clock::time_point deadline) {
  const std::string subject = all_subjects(o);
  const char* subjects[] = {subject.c_str()};
  status last;
  do {
    bool missing = false;
    auto info = fetch_info(js, o.stream, &missing);
    if (info.ok()) {
      status v = validate(*(*info)->Config, o);
      stream_state st = to_state(*info);
      jsStreamInfo_Destroy(*info);
      if (!v.ok()) return v;
      return st;
    }
    last = info.status();
    if (missing) {
      jsStreamConfig sc;
      jsStreamConfig_Init(&sc);
      sc.Name = o.stream.c_str();
      sc.Subjects = subjects;
      sc.SubjectsLen = 1;
      sc.Storage = js_FileStorage;
      sc.Replicas = o.replicas;
      sc.Retention = js_LimitsPolicy;
      sc.Discard = js_DiscardNew;
      sc.MaxBytes = o.max_bytes;
      sc.MaxAge = 0;
      sc.Duplicates = static_cast<std::int64_t>(o.duplicate_window.count()) * ns_per_s;
      jsStreamInfo* si = nullptr;
      jsErrCode jerr = static_cast<jsErrCode>(0);
      natsStatus s = js_AddStream(&si, js, &sc, nullptr, &jerr);
      if (s == NATS_OK) {
        stream_state st = to_state(si);
        jsStreamInfo_Destroy(si);
        return st;
      }
      last = status{errc::unavailable, "create stream " + o.stream + ": " + describe(s, jerr)};
      if (jerr == JSStorageResourcesExceededErr || jerr == JSStreamReplicasNotSupportedErr) {
        return status{errc::invalid_argument, last.message()};
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (ms_left(deadline) > 0);
  return last;
}

std::uint64_t now_us() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

// ---- writer ---------------------------------------------------------------------------

struct writer::impl {
  options opts;
  std::unique_ptr<detail::connection> conn;
  std::string subject;
  std::atomic<std::uint64_t> next_counter{1};
  std::atomic<std::uint64_t> appends{0}, duplicates{0}, retries{0}, unknown{0}, refused{0};
  // Set when an append ran out of budget, cleared by the next acknowledged one: while it is
  // set and the connection is down, appends are refused at once (spec §3.8: no queueing).
  std::atomic<bool> marked_unavailable{false};
};

writer::writer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
writer::~writer() = default;

result<std::unique_ptr<writer>> writer::open(const options& opts) {
  if (status s = validate_origin(opts.replica_id); !s.ok()) return s;
  if (opts.replicas < 1 || opts.replicas > 5) {
    return status{errc::invalid_argument,
                  "nats replicas must be 1..5, got " + std::to_string(opts.replicas)};
  }
  if (opts.append_timeout.count() <= 0) {
    return status{errc::invalid_argument, "journal append timeout must be > 0"};
  }
  const auto deadline = clock::now() + opts.open_timeout;
  auto conn = detail::connection::open(opts.servers, opts.replica_id + "-writer",
                                       opts.creds_file, opts.open_timeout);
  if (!conn.ok()) return conn.status();
  auto st = ensure_stream((*conn)->js(), opts, deadline);
  if (!st.ok()) return st.status();
  auto p = std::make_unique<impl>();
  p->opts = opts;
  if (p->opts.epoch == 0) p->opts.epoch = now_us();
  p->conn = std::move(*conn);
  p->subject = batch_subject(opts);
  return std::unique_ptr<writer>(new writer(std::move(p)));
}

batch_id writer::peek_next_id() const {
  return {impl_->opts.replica_id, impl_->opts.epoch, impl_->next_counter.load()};
}

result<append_ack> writer::append(const std::vector<record_in>& records) {
  if (records.empty()) return status{errc::invalid_argument, "empty batch"};
  batch_id id{impl_->opts.replica_id, impl_->opts.epoch, impl_->next_counter.fetch_add(1)};
  return append(records, id);
}

result<append_ack> writer::append(const std::vector<record_in>& records, const batch_id& id) {
  return publish(records, id, impl_->subject, std::nullopt);
}

result<append_ack> writer::append_conditional(const std::vector<record_in>& records,
                                              const std::string& scope,
                                              std::uint64_t expected_last) {
  if (records.empty()) return status{errc::invalid_argument, "empty batch"};
  batch_id id{impl_->opts.replica_id, impl_->opts.epoch, impl_->next_counter.fetch_add(1)};
  return publish(records, id, impl_->opts.subject_prefix + "." + scope, expected_last);
}

result<std::uint64_t> writer::last_on_subject(const std::string& scope) const {
  const std::string subject = impl_->opts.subject_prefix + "." + scope;
  natsMsg* m = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = NATS_OK;
  // A stream created a moment ago by another replica may have no leader yet: the request
  // gets no answer (2.9.10) and is asked again, each attempt bounded, within open_timeout.
  const auto deadline = clock::now() + impl_->opts.open_timeout;
  do {
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = std::max<std::int64_t>(
        1, std::min<std::int64_t>(impl_->opts.attempt_timeout.count(), ms_left(deadline)));
    jerr = static_cast<jsErrCode>(0);
    s = js_GetLastMsg(&m, impl_->conn->js(), impl_->opts.stream.c_str(), subject.c_str(), &jo,
                      &jerr);
  } while ((s == NATS_TIMEOUT || s == NATS_NO_RESPONDERS) && ms_left(deadline) > 0);
  if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return std::uint64_t{0};
  if (s != NATS_OK) {
    return status{errc::unavailable, "last message on " + subject + ": " + describe(s, jerr)};
  }
  const std::uint64_t seq = natsMsg_GetSequence(m);
  natsMsg_Destroy(m);
  return seq;
}

std::size_t writer::fitting_prefix(const std::vector<record_in>& records) const {
  const std::int64_t max_payload = natsConnection_GetMaxPayload(impl_->conn->nc());
  if (max_payload <= 0) return records.size();
  // The longest origin an id may carry, so the answer holds for every batch id.
  std::size_t payload = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    payload += records[i].payload.size();
    if (envelope_size(255, i + 1, payload) > static_cast<std::size_t>(max_payload))
      return std::max<std::size_t>(i, 1);
  }
  return records.size();
}

result<append_ack> writer::publish(const std::vector<record_in>& records, const batch_id& id,
                                   const std::string& subject,
                                   std::optional<std::uint64_t> expected_last) {
  if (records.empty()) return status{errc::invalid_argument, "empty batch"};
  if (status s = validate_origin(id.origin); !s.ok()) return s;
  std::string body;
  encode_envelope(id, records.data(), records.size(), &body);
  const std::int64_t max_payload = natsConnection_GetMaxPayload(impl_->conn->nc());
  if (max_payload > 0 && static_cast<std::int64_t>(body.size()) > max_payload) {
    ++impl_->refused;
    return status{errc::invalid_argument,
                  "envelope of " + std::to_string(body.size()) +
                      " bytes exceeds the NATS max_payload of " + std::to_string(max_payload)};
  }
  const std::string mid = msg_id(id);
  if (impl_->marked_unavailable.load() && !impl_->conn->connected()) {
    ++impl_->refused;
    return status{errc::unavailable, "journal unavailable: NATS is disconnected and the last "
                                     "append ran out of budget; msg id " + mid +
                                         " not published"};
  }
  const auto deadline = clock::now() + impl_->opts.append_timeout;
  std::chrono::milliseconds backoff(20);
  std::string last_error = "no attempt";
  int attempts = 0;
  for (;;) {
    const std::int64_t left = ms_left(deadline);
    if (left == 0 && attempts > 0) break;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = mid.c_str();
    if (expected_last) {
      if (*expected_last == 0) po.ExpectNoMessage = true;
      else po.ExpectLastSubjectSeq = *expected_last;
    }
    po.MaxWait = std::max<std::int64_t>(1, std::min<std::int64_t>(impl_->opts.attempt_timeout.count(), left));
    jsPubAck* pa = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    ++attempts;
    natsStatus s = js_Publish(&pa, impl_->conn->js(), subject.c_str(), body.data(),
                              static_cast<int>(body.size()), &po, &jerr);
    if (s == NATS_OK) {
      append_ack ack{pa->Sequence, mid, pa->Duplicate, attempts};
      jsPubAck_Destroy(pa);
      ++impl_->appends;
      if (ack.duplicate) ++impl_->duplicates;
      impl_->marked_unavailable = false;
      return ack;
    }
    jsPubAck_Destroy(pa);
    last_error = describe(s, jerr);
    // Discard=new refused it: definitely not stored, and retrying will not help until the
    // stream is truncated.
    if (jerr == JSStreamStoreFailedErr || jerr == JSStreamMessageExceedsMaximumErr) {
      ++impl_->refused;
      return status{errc::unavailable, "stream full: " + impl_->opts.stream +
                                           " refused msg id " + mid + " (Discard=new, " +
                                           last_error + "); not stored"};
    }
    if (jerr == JSStreamWrongLastSequenceErr) {
      ++impl_->refused;
      return status{errc::conflict, "another message on " + subject +
                                        " came first (expected last sequence " +
                                        std::to_string(expected_last.value_or(0)) +
                                        "); msg id " + mid + " not stored"};
    }
    if (s == NATS_CONNECTION_CLOSED) break;
    if (ms_left(deadline) == 0) break;
    ++impl_->retries;
    if (s != NATS_TIMEOUT) {
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
          backoff, std::chrono::milliseconds(ms_left(deadline))));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
  }
  ++impl_->unknown;
  impl_->marked_unavailable = true;
  return status{errc::unavailable,
                "outcome unknown; retry: no PubAck for msg id " + mid + " within " +
                    std::to_string(impl_->opts.append_timeout.count()) + " ms (" +
                    std::to_string(attempts) + " attempts, last: " + last_error + ")"};
}

result<stream_state> writer::state() const {
  bool missing = false;
  auto info = fetch_info(impl_->conn->js(), impl_->opts.stream, &missing);
  if (!info.ok()) return info.status();
  stream_state st = to_state(*info);
  jsStreamInfo_Destroy(*info);
  return st;
}

status writer::truncate_before(std::uint64_t position) {
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Stream.Purge.Sequence = position;  // removes every sequence below it
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_PurgeStream(impl_->conn->js(), impl_->opts.stream.c_str(), &jo, &jerr);
  if (s != NATS_OK) {
    return {errc::unavailable, "purge " + impl_->opts.stream + " below " +
                                   std::to_string(position) + ": " + describe(s, jerr)};
  }
  return {};
}

writer_stats writer::stats() const {
  return {impl_->appends.load(), impl_->duplicates.load(), impl_->retries.load(),
          impl_->unknown.load(), impl_->refused.load()};
}

bool writer::connected() const { return impl_->conn->connected(); }

// ---- reader ---------------------------------------------------------------------------

struct reader::impl {
  options opts;
  std::unique_ptr<detail::connection> conn;
  natsSubscription* sub = nullptr;
  std::uint64_t expected = 0;
  std::uint64_t resets = 0;
  std::uint64_t redelivered = 0;
  status failed;  // sticky after a gap

  ~impl() {
    if (sub != nullptr) {
      // Deletes the ephemeral consumer (a JetStream API call waiting up to 10 s). While
      // disconnected, skip it: the server drops an ordered consumer by itself once idle.
      if (conn && conn->connected()) natsSubscription_Unsubscribe(sub);
      natsSubscription_Destroy(sub);
    }
  }
};

reader::reader(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
reader::~reader() = default;

result<std::unique_ptr<reader>> reader::open(const options& opts, std::uint64_t from) {
  if (from == 0) return status{errc::invalid_argument, "reader: from must be >= 1"};
  const auto deadline = clock::now() + opts.open_timeout;
  auto conn = detail::connection::open(opts.servers, opts.replica_id + "-reader",
                                       opts.creds_file, opts.open_timeout);
  if (!conn.ok()) return conn.status();
  auto p = std::make_unique<impl>();
  p->opts = opts;
  p->conn = std::move(*conn);
  p->expected = from;
  const std::string subject = all_subjects(opts);
  status last;
  do {
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = opts.stream.c_str();
    so.Ordered = true;
    // Idle heartbeat 250 ms: libnats checks every 2 heartbeats and recreates an ordered
    // consumer that saw none, so a consumer lost with its NATS node is back within ~1 s.
    // With 1 s, the producers' Acks on this replica stalled 3.6-5.7 s after a follower node
    // was killed (docs/benchmarks.md). A needless reset under load only costs one API call:
    // the sequence check below carries over.
    so.Config.Heartbeat = ns_per_s / 4;
    so.Config.DeliverPolicy = js_DeliverByStartSequence;
    so.Config.OptStartSeq = from;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    natsStatus s = js_SubscribeSync(&p->sub, p->conn->js(), subject.c_str(), nullptr, &so, &jerr);
    if (s == NATS_OK) {
      // A fast replay must queue, not drop (defaults 65 536 msgs / 64 MiB would reset it).
      natsSubscription_SetPendingLimits(p->sub, 1 << 20, 1 << 30);
      return std::unique_ptr<reader>(new reader(std::move(p)));
    }
    p->sub = nullptr;
    const bool missing = s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr;
    last = status{missing ? errc::not_found : errc::unavailable,
                  "subscribe to stream " + opts.stream + ": " + describe(s, jerr)};
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (ms_left(deadline) > 0);
  return last;
}

result<std::optional<delivered_batch>> reader::next(std::chrono::milliseconds wait) {
  if (!impl_->failed.ok()) return impl_->failed;
  natsMsg* m = nullptr;
  natsStatus s = natsSubscription_NextMsg(&m, impl_->sub, std::max<std::int64_t>(1, wait.count()));
  if (s == NATS_TIMEOUT) return std::optional<delivered_batch>();
  if (s == NATS_MISMATCH || s == NATS_SLOW_CONSUMER) {  // the library recreates the consumer
    ++impl_->resets;
    return std::optional<delivered_batch>();
  }
  if (s != NATS_OK) return status{errc::unavailable, "reader: " + describe(s)};
  std::shared_ptr<const void> owner(m, [](const void* p) {
    natsMsg_Destroy(static_cast<natsMsg*>(const_cast<void*>(p)));
  });
  jsMsgMetaData* meta = nullptr;
  s = natsMsg_GetMetaData(&meta, m);
  if (s != NATS_OK) return status{errc::internal, "reader: message without metadata: " + describe(s)};
  delivered_batch b;
  b.position = meta->Sequence.Stream;
  b.stored_at_ns = meta->Timestamp;
  jsMsgMetaData_Destroy(meta);
  if (b.position < impl_->expected) {
    // Already delivered: after a leader failover the library's ordered consumer can be
    // recreated from a point it had passed and hands a message again. Its position is below
    // the next expected one, so it was applied; skip it. Only a jump forward is a gap.
    ++impl_->redelivered;
    return std::optional<delivered_batch>();
  }
  if (b.position != impl_->expected) {
    impl_->failed = status{errc::out_of_range,
                           "gap in stream " + impl_->opts.stream + ": expected sequence " +
                               std::to_string(impl_->expected) + ", got " +
                               std::to_string(b.position) +
                               " (purged past it: load a shared snapshot covering >= " +
                               std::to_string(b.position - 1) + ")"};
    return impl_->failed;
  }
  impl_->expected = b.position + 1;
  b.subject = natsMsg_GetSubject(m);
  const char* hdr = nullptr;
  if (natsMsgHeader_Get(m, "Nats-Msg-Id", &hdr) == NATS_OK && hdr != nullptr) b.msg_id = hdr;
  envelope_view env;
  b.problem = decode_envelope(
      std::string_view(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m))),
      &env);
  if (b.problem.ok()) {
    b.id = std::move(env.id);
    b.records.reserve(env.records.size());
    for (const auto& r : env.records) b.records.push_back({b.position, r.type, r.payload});
  }
  b.owner = std::move(owner);
  return std::optional<delivered_batch>(std::move(b));
}

status reader::follow(std::uint64_t until,
                      const std::function<bool(const delivered_batch&)>& visit,
                      std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  while (impl_->expected <= until) {
    const std::int64_t left = ms_left(deadline);
    if (left == 0) {
      return {errc::unavailable, "reader: sequence " + std::to_string(until) +
                                     " not reached within " + std::to_string(timeout.count()) +
                                     " ms (next expected " + std::to_string(impl_->expected) + ")"};
    }
    auto got = next(std::chrono::milliseconds(std::min<std::int64_t>(left, 200)));
    if (!got.ok()) return got.status();
    if (got->has_value() && !visit(**got)) return {};
  }
  return {};
}

std::uint64_t reader::expected() const { return impl_->expected; }
std::uint64_t reader::resets() const { return impl_->resets; }
std::uint64_t reader::redelivered() const { return impl_->redelivered; }

}  // namespace ic::journal::jetstream
