// RenderTemplate core throughput for a 4 KiB body (target ≥ 100 k renders/s on one core).
//
//   ./build/templates/ic_templates_bench
#include <string>

#include <benchmark/benchmark.h>

#include "templates/template_store.hpp"

namespace {

using namespace ic::templates;

/// A ~4 KiB system prompt with 4 Stable slots, then a Mutable history slot and a Stable tail.
template_set four_kib_set() {
  std::string body = "You are {{ persona }}, the support agent of {{ company }} for {{ product }}.\n";
  const std::string rule = "- Answer precisely, cite the relevant manual section, never invent facts.\n";
  const std::string tail =
      "Locale: {{ locale }}\nConversation so far:\n{{ history }}\nAnswer as {{ persona }}:\n";
  while (body.size() + tail.size() < 4096) body += rule;
  body += tail;
  template_def t{"serving", "agent", body,
                 {{"persona", slot_type::stable, true, ""}, {"company", slot_type::stable, true, ""},
                  {"product", slot_type::stable, true, ""}, {"locale", slot_type::stable, false, ""},
                  {"history", slot_type::mutable_, true, ""}}};
  template_set set;
  set.templates.push_back(std::move(t));
  return set;
}

void BM_Render4KiB(benchmark::State& st) {
  template_snapshot snap(four_kib_set());
  render_request req{"agent",
                     {{"persona", "Ava"}, {"company", "Acme Corp"}, {"product", "Rocket Skates"},
                      {"locale", "en-GB"}, {"history", "user: my skates squeak\nassistant: "}},
                     "serving"};
  std::size_t bytes = 0;
  for (auto _ : st) {
    auto r = render(snap, req);
    bytes += r.rendered_prompt.size();
    benchmark::DoNotOptimize(r);
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  st.counters["renders/s"] = benchmark::Counter(static_cast<double>(st.iterations()),
                                                benchmark::Counter::kIsRate);
  st.SetLabel(std::to_string(snap.set().templates[0].body.size()) + "-byte body");
}
BENCHMARK(BM_Render4KiB);

}  // namespace

BENCHMARK_MAIN();
