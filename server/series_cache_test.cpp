#include "server/series_cache.hpp"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>
#include <string>

namespace ic::server {
namespace {

std::string text_of(prometheus::Registry& r) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, r.Collect());
  return out.str();
}

TEST(SeriesCache, FindsTheSameSeriesForTheSameLabelValuesAndNewOnesForOthers) {
  prometheus::Registry r;
  auto& family = prometheus::BuildCounter().Name("calls_total").Help("h").Register(r);
  series_cache<prometheus::Counter, 2> cache(&family, {"model", "reason"});
  const std::string model = "a-model-name-longer-than-sso";
  prometheus::Counter& first = cache.get({model, "PREFIX_MATCH"});
  first.Increment();
  prometheus::Counter& again = cache.get({std::string_view(model), std::string("PREFIX_MATCH")});
  again.Increment();
  EXPECT_EQ(&first, &again);
  prometheus::Counter& other = cache.get({model, "NONE"});
  EXPECT_NE(&first, &other);
  other.Increment();
  // The series are the family's own, with the label names given.
  const std::string text = text_of(r);
  EXPECT_NE(text.find("calls_total{model=\"a-model-name-longer-than-sso\",reason=\"PREFIX_MATCH\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("calls_total{model=\"a-model-name-longer-than-sso\",reason=\"NONE\"} 1"),
            std::string::npos)
      << text;
}

TEST(SeriesCache, KeysCompareEveryLabelValueNotTheirConcatenation) {
  prometheus::Registry r;
  auto& family = prometheus::BuildCounter().Name("c_total").Help("h").Register(r);
  series_cache<prometheus::Counter, 2> cache(&family, {"x", "y"});
  EXPECT_NE(&cache.get({"ab", "c"}), &cache.get({"a", "bc"}));
}

TEST(SeriesCache, AHistogramIsBuiltOnceWithItsBuckets) {
  prometheus::Registry r;
  auto& family = prometheus::BuildHistogram().Name("lat_seconds").Help("h").Register(r);
  series_cache<prometheus::Histogram, 1> cache(&family, {"model"});
  const prometheus::Histogram::BucketBoundaries buckets{0.001, 0.01};
  cache.get({"m"}, buckets).Observe(0.005);
  cache.get({"m"}, buckets).Observe(0.5);
  const std::string text = text_of(r);
  EXPECT_NE(text.find("lat_seconds_bucket{model=\"m\",le=\"0.01\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_count{model=\"m\"} 2"), std::string::npos) << text;
}

}  // namespace
}  // namespace ic::server
