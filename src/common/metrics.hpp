#pragma once
/// @file Metrics in the OpenMetrics text format (what Prometheus scrapes), and the HTTP endpoint
/// that serves them. Names follow the Prometheus conventions: a `harmonia_` prefix, base units
/// (seconds, bytes) in the name, counters ending in `_total`.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace harmonia::common::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

/// Observations counted in buckets (their upper bounds, ascending), with their count and sum.
/// Thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<std::uint64_t> cumulative;  ///< per bound, then +Inf (the count)
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  ///< per bound, then one for above the last
  double sum_ = 0;
};

/// Bucket bounds for durations from 100 us to about 100 s (powers of about 3.16).
std::vector<double> seconds_buckets();

/// One scrape's text. Every family is declared once, with all its samples together; `name`
/// without the `_total` of a counter's samples. `unit` ("bytes", "seconds" or "") must be the
/// end of the name when given.
class Exposition {
 public:
  void gauge(const std::string& name, const std::string& help, const std::string& unit,
             const std::vector<std::pair<Labels, double>>& samples);
  void gauge(const std::string& name, const std::string& help, const std::string& unit,
             double value) {
    gauge(name, help, unit, {{Labels{}, value}});
  }
  void counter(const std::string& name, const std::string& help, const std::string& unit,
               const std::vector<std::pair<Labels, double>>& samples);
  void counter(const std::string& name, const std::string& help, const std::string& unit,
               double value) {
    counter(name, help, unit, {{Labels{}, value}});
  }
  void histogram(const std::string& name, const std::string& help, const std::string& unit,
                 const Histogram::Snapshot& snapshot);
  /// The text, closed with "# EOF".
  std::string text() const { return text_ + "# EOF\n"; }

 private:
  void family(const std::string& name, const char* type, const std::string& help,
              const std::string& unit);
  std::string text_;
};

/// The `limit` largest of `values` by label value, and the rest summed under "other": a bound on
/// the series a label (a job) can make.
std::vector<std::pair<Labels, double>> largest(const std::string& label,
                                               std::vector<std::pair<std::string, double>> values,
                                               std::size_t limit);

/// The content type of Exposition::text.
inline constexpr const char* kContentType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// An HTTP server answering GET /metrics with what `render` returns, on its own threads.
class Endpoint {
 public:
  /// `address`: HOST:PORT, or PORT alone for 127.0.0.1:PORT (port 0: any free port). Throws
  /// std::runtime_error naming `option` and the address when it cannot listen there.
  Endpoint(const std::string& address, const std::string& option,
           std::function<std::string()> render);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  /// The port bound.
  int port() const { return port_; }
  /// HOST:PORT as bound.
  std::string address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = 0;
};

}  // namespace harmonia::common::metrics
