#include "core/pricing.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace harmonia::core {

std::vector<IoClass> default_io_classes() {
  return {{"normal", 1, 1}, {"relaxed", 2, 0.7}, {"scavenger", 4, 0.5}};
}

PricingConfig::PricingConfig() : classes(default_io_classes()) {}

void PricingConfig::validate() const {
  if (!(node_hour_rate >= 0) || !std::isfinite(node_hour_rate))
    throw std::invalid_argument("pricing: node_hour_rate must be a number >= 0");
  if (classes.empty()) throw std::invalid_argument("pricing: classes must not be empty");
  for (const auto& c : classes) {
    const std::string where = "pricing: class '" + c.name + "': ";
    if (c.name.empty()) throw std::invalid_argument("pricing: a class has no name");
    if (!(c.slowdown >= 1) || !std::isfinite(c.slowdown))
      throw std::invalid_argument(where + "slowdown must be a number >= 1");
    if (!(c.usage_factor >= 0) || !std::isfinite(c.usage_factor))
      throw std::invalid_argument(where + "usage_factor must be a number >= 0");
    if (std::count_if(classes.begin(), classes.end(),
                      [&](const IoClass& o) { return o.name == c.name; }) > 1)
      throw std::invalid_argument(where + "defined twice");
  }
}

IoClass PricingConfig::resolve(const std::string& io_qos) const {
  for (const auto& c : classes)
    if (c.name == io_qos) return c;
  double slowdown = 0;
  size_t used = 0;
  try {
    slowdown = std::stod(io_qos, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != io_qos.size() || !(slowdown >= 1) || !std::isfinite(slowdown)) {
    std::string names;
    for (const auto& c : classes) names += (names.empty() ? "" : ", ") + c.name;
    throw std::invalid_argument("io_qos '" + io_qos + "': not a class (" + names +
                                ") nor a slowdown >= 1");
  }
  // A job naming its own bound pays what the classes around it pay, interpolated: a site prices
  // a few classes and every bound in between follows.
  auto sorted = classes;
  std::sort(sorted.begin(), sorted.end(),
            [](const IoClass& a, const IoClass& b) { return a.slowdown < b.slowdown; });
  IoClass out{io_qos, slowdown, sorted.front().usage_factor};
  if (slowdown >= sorted.back().slowdown) {
    out.usage_factor = sorted.back().usage_factor;
  } else {
    for (size_t i = 1; i < sorted.size(); ++i) {
      const auto& lo = sorted[i - 1];
      const auto& hi = sorted[i];
      if (slowdown >= lo.slowdown && slowdown <= hi.slowdown) {
        const double span = hi.slowdown - lo.slowdown;
        const double t = span > 0 ? (slowdown - lo.slowdown) / span : 0;
        out.usage_factor = lo.usage_factor + t * (hi.usage_factor - lo.usage_factor);
        break;
      }
    }
  }
  return out;
}

Charge charge(const Usage& usage, const IoClass& io_class, const PricingConfig& pricing) {
  Charge out;
  out.slowdown = usage.io_alone > 0 ? usage.io_taken / usage.io_alone : 1.0;
  if (io_class.slowdown > 1) {
    const double promised = io_class.slowdown * usage.io_alone;
    out.refunded = std::max(0.0, usage.io_taken - promised);
    // Time granularity: a bound missed by float dust is kept.
    out.bound_broken = out.refunded > 1e-6;
    if (!out.bound_broken) out.refunded = 0;
  }
  const double billed_seconds = std::max(0.0, usage.elapsed - out.refunded);
  out.billed_hours = usage.nodes * billed_seconds / 3600.0;
  out.amount = out.billed_hours * pricing.node_hour_rate * io_class.usage_factor;
  return out;
}

}  // namespace harmonia::core
