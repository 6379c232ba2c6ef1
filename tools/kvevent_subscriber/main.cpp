// inferencecache-kvevent-subscriber: the engine-side sidecar (see app.hpp and README.md).
#include <iostream>

#include "tools/kvevent_subscriber/app.hpp"
#include "tools/kvevent_subscriber/config.hpp"

int main(int argc, char** argv) {
  auto parsed = ic::kvevent::parse_config(argc, argv);
  if (auto* e = std::get_if<ic::kvevent::parse_exit>(&parsed)) {
    (e->code == 0 ? std::cout : std::cerr) << e->text << "\n";
    return e->code;
  }
  return ic::kvevent::run_subscriber(std::get<ic::kvevent::config>(parsed));
}
