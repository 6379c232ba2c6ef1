// inferencecache-journal: inspects a server's journal directory (offline).
//
//   inferencecache-journal --data-dir ./data summary      # counts, sequence range, snapshots
//   inferencecache-journal --data-dir ./data records --from 100 --limit 20 [--json]
//   inferencecache-journal --data-dir ./data snapshots
//   inferencecache-journal --data-dir ./data verify       # every record and snapshot checksum
//
// Exit codes: 0 ok, 1 the journal cannot be opened or fails verification, 2 usage.
// The journal is opened exclusively: stop the server first.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include <CLI/CLI.hpp>
#include <google/protobuf/util/json_util.h>

#include "proto/record_codec.hpp"
#include "inferencecache/journal/v1/journal.pb.h"
#include "journal/log.hpp"

namespace {

std::string record_json(const ic::journal::record_view& r) {
  inferencecache::journal::v1::Record rec;
  std::string body;
  if (!rec.ParseFromArray(r.payload.data(), static_cast<int>(r.payload.size()))) {
    body = "null";
  } else {
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    if (!google::protobuf::util::MessageToJsonString(rec, &body, opts).ok()) body = "null";
  }
  return "{\"seq\":" + std::to_string(r.seq) + ",\"type\":\"" + ic::proto::kind_name(r.type) +
         "\",\"bytes\":" + std::to_string(r.payload.size()) + ",\"record\":" + body + "}";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inferencecache-journal: inspect an inferencecache-server journal (offline)"};
  std::string data_dir = "./data", journal_dir;
  std::uint64_t from = 0;
  std::size_t limit = 50;
  bool json = false;
  app.add_option("--data-dir", data_dir, "the server's --data-dir (journal in <dir>/journal)")
      ->capture_default_str();
  app.add_option("--journal", journal_dir, "the journal directory itself (overrides --data-dir)");
  app.require_subcommand(1);
  auto* summary = app.add_subcommand("summary", "record counts, sequence range and snapshots");
  auto* records = app.add_subcommand("records", "list records");
  records->add_option("--from", from, "first sequence number (default: the oldest)");
  records->add_option("--limit", limit, "records to print")->capture_default_str();
  records->add_flag("--json", json, "one JSON object per line (decoded record)");
  auto* snapshots = app.add_subcommand("snapshots", "list snapshots");
  auto* verify = app.add_subcommand("verify", "check every record and snapshot checksum");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "inferencecache-journal: " << e.what() << "\n";
    return 2;
  }
  if (journal_dir.empty()) journal_dir = data_dir + "/journal";

  ic::journal::options opts;
  opts.create_if_missing = false;
  auto opened = ic::journal::log::open(journal_dir, opts);
  if (!opened.ok()) {
    std::cerr << "inferencecache-journal: " << opened.status().to_string() << "\n";
    return 1;
  }
  auto& log = *opened.value();

  if (summary->parsed()) {
    std::map<std::string, std::uint64_t> counts;
    std::uint64_t bytes = 0, n = 0, undecodable = 0;
    std::int64_t first_at = 0, last_at = 0;
    auto st = log.read(log.truncated_through() + 1, [&](const ic::journal::record_view& r) {
      ++n;
      ++counts[ic::proto::kind_name(r.type)];
      bytes += r.payload.size();
      auto rec = ic::proto::decode_record(r.type, r.payload);
      if (!rec) {
        ++undecodable;
      } else {
        if (first_at == 0) first_at = rec->applied_at_us;
        last_at = rec->applied_at_us;
      }
      return true;
    });
    if (!st.ok()) {
      std::cerr << "inferencecache-journal: " << st.to_string() << "\n";
      return 1;
    }
    std::cout << "journal:            " << journal_dir << "\n"
              << "format version:     " << log.info().format_version << "\n"
              << "sequence range:     " << log.truncated_through() + 1 << ".." << log.last_sequence()
              << " (truncated through " << log.truncated_through() << ")\n"
              << "records:            " << n << " (" << bytes << " payload bytes)\n";
    for (const auto& [k, c] : counts) std::cout << "  " << k << ": " << c << "\n";
    std::cout << "applied_at range:   " << first_at << " .. " << last_at << " (unix us)\n"
              << "undecodable:        " << undecodable << "\n"
              << "sst bytes:          " << log.sst_bytes() << "\n";
    auto snaps = log.list_snapshots();
    std::cout << "snapshots:          " << (snaps.ok() ? snaps.value().size() : 0) << "\n";
    return undecodable == 0 ? 0 : 1;
  }
  if (records->parsed()) {
    std::size_t printed = 0;
    auto st = log.read(std::max(from, log.truncated_through() + 1),
                       [&](const ic::journal::record_view& r) {
                         if (json) {
                           std::cout << record_json(r) << "\n";
                         } else {
                           auto rec = ic::proto::decode_record(r.type, r.payload);
                           std::printf("%10llu  %-7s %8zu bytes  applied_at_us=%lld%s\n",
                                       static_cast<unsigned long long>(r.seq), ic::proto::kind_name(r.type),
                                       r.payload.size(),
                                       static_cast<long long>(rec ? rec->applied_at_us : 0),
                                       rec ? "" : "  UNDECODABLE");
                         }
                         return ++printed < limit;
                       });
    if (!st.ok()) {
      std::cerr << "inferencecache-journal: " << st.to_string() << "\n";
      return 1;
    }
    return 0;
  }
  if (snapshots->parsed()) {
    auto snaps = log.list_snapshots();
    if (!snaps.ok()) {
      std::cerr << "inferencecache-journal: " << snaps.status().to_string() << "\n";
      return 1;
    }
    if (snaps.value().empty()) std::cout << "no snapshots\n";
    for (const auto& s : snaps.value())
      std::printf("snapshot %llu covers seq %llu: %s, %llu chunks, %llu bytes%s%s\n",
                  static_cast<unsigned long long>(s.id),
                  static_cast<unsigned long long>(s.covering_seq),
                  s.complete ? "complete" : "INCOMPLETE",
                  static_cast<unsigned long long>(s.chunk_count),
                  static_cast<unsigned long long>(s.total_bytes), s.problem.empty() ? "" : ": ",
                  s.problem.c_str());
    return 0;
  }
  if (verify->parsed()) {
    int bad = 0;
    auto st = log.verify();
    std::cout << "records: " << (st.ok() ? "ok" : st.to_string()) << "\n";
    if (!st.ok()) ++bad;
    std::uint64_t undecodable = 0;
    // A read error here was already reported (and counted) by verify() above.
    (void)log.read(log.truncated_through() + 1, [&](const ic::journal::record_view& r) {
      if (!ic::proto::decode_record(r.type, r.payload)) ++undecodable;
      return true;
    });
    std::cout << "decoding: " << (undecodable ? std::to_string(undecodable) + " undecodable" : "ok")
              << "\n";
    if (undecodable) ++bad;
    auto snaps = log.list_snapshots();
    if (snaps.ok()) {
      for (const auto& s : snaps.value()) {
        auto vs = log.verify_snapshot(s.id);
        std::cout << "snapshot " << s.id << ": " << (vs.ok() ? "ok" : vs.to_string()) << "\n";
        if (!vs.ok()) ++bad;
      }
    }
    return bad == 0 ? 0 : 1;
  }
  return 2;
}
