#include "common/metrics.hpp"

#include <httplib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace harmonia::common::metrics {

namespace {

std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Whole numbers (bytes, counts) as integers; the rest in the shortest form that reads back
  // exactly, without an exponent where one is not needed (Unix times, seconds).
  if (value == std::floor(value) && std::fabs(value) < 0x1p53)
    return std::to_string(static_cast<long long>(value));
  const bool plain = std::fabs(value) >= 1e-4 && std::fabs(value) < 1e15;
  char text[64];
  const auto end = std::to_chars(text, text + sizeof(text), value,
                                 plain ? std::chars_format::fixed : std::chars_format::general)
                       .ptr;
  return std::string(text, end);
}

std::string escaped(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\' || c == '"')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string labels_text(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i)
    out += (i ? "," : "") + labels[i].first + "=\"" + escaped(labels[i].second) + "\"";
  return out + "}";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double value) {
  std::lock_guard lock(mutex_);
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<std::size_t>(at)];
  sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mutex_);
  Snapshot out{bounds_, {}, sum_};
  std::uint64_t total = 0;
  for (const auto count : counts_) out.cumulative.push_back(total += count);
  return out;
}

std::vector<double> seconds_buckets() {
  return {1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100};
}

void Exposition::family(const std::string& name, const char* type, const std::string& help,
                        const std::string& unit) {
  text_ += "# TYPE " + name + " " + type + "\n";
  if (!unit.empty()) text_ += "# UNIT " + name + " " + unit + "\n";
  text_ += "# HELP " + name + " " + escaped(help) + "\n";
}

void Exposition::gauge(const std::string& name, const std::string& help, const std::string& unit,
                       const std::vector<std::pair<Labels, double>>& samples) {
  family(name, "gauge", help, unit);
  for (const auto& [labels, value] : samples)
    text_ += name + labels_text(labels) + " " + number(value) + "\n";
}

void Exposition::counter(const std::string& name, const std::string& help, const std::string& unit,
                         const std::vector<std::pair<Labels, double>>& samples) {
  family(name, "counter", help, unit);
  for (const auto& [labels, value] : samples)
    text_ += name + "_total" + labels_text(labels) + " " + number(value) + "\n";
}

void Exposition::histogram(const std::string& name, const std::string& help,
                           const std::string& unit, const Histogram::Snapshot& snapshot) {
  family(name, "histogram", help, unit);
  for (std::size_t i = 0; i < snapshot.bounds.size(); ++i)
    text_ += name + "_bucket{le=\"" + number(snapshot.bounds[i]) + "\"} " +
             std::to_string(snapshot.cumulative[i]) + "\n";
  const auto count = snapshot.cumulative.back();
  text_ += name + "_bucket{le=\"+Inf\"} " + std::to_string(count) + "\n";
  text_ += name + "_sum " + number(snapshot.sum) + "\n";
  text_ += name + "_count " + std::to_string(count) + "\n";
}

std::vector<std::pair<Labels, double>> largest(const std::string& label,
                                               std::vector<std::pair<std::string, double>> values,
                                               std::size_t limit) {
  std::sort(values.begin(), values.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::pair<Labels, double>> out;
  double rest = 0;
  bool others = false;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i < limit && values[i].first != "other") {
      out.push_back({{{label, values[i].first}}, values[i].second});
    } else {
      rest += values[i].second;
      others = true;
    }
  }
  if (others) out.push_back({{{label, "other"}}, rest});
  return out;
}

struct Endpoint::Impl {
  httplib::Server server;
  std::thread thread;
};

Endpoint::Endpoint(const std::string& address, const std::string& option,
                   std::function<std::string()> render)
    : impl_(std::make_unique<Impl>()) {
  const auto colon = address.rfind(':');
  std::string port_text = address;
  host_ = "127.0.0.1";
  if (colon != std::string::npos) {
    host_ = address.substr(0, colon);
    port_text = address.substr(colon + 1);
    if (host_.size() >= 2 && host_.front() == '[' && host_.back() == ']')
      host_ = host_.substr(1, host_.size() - 2);
  }
  int port = -1;
  const auto [end, error] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port < 0 ||
      port > 65535 || host_.empty())
    throw std::runtime_error(option + " " + address + ": expected HOST:PORT or PORT (0 to 65535)");
  // Two threads serve scrapes: Prometheus asks every few seconds, from one place.
  impl_->server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  impl_->server.Get("/metrics", [render](const httplib::Request&, httplib::Response& response) {
    response.set_content(render(), kContentType);
  });
  impl_->server.Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("Harmonia metrics: GET /metrics\n", "text/plain");
  });
  port_ = port == 0 ? impl_->server.bind_to_any_port(host_) : port;
  if (port_ < 0 || (port != 0 && !impl_->server.bind_to_port(host_, port)))
    throw std::runtime_error(option + " " + address + ": cannot listen there (" +
                             std::strerror(errno) + ")");
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
}

Endpoint::~Endpoint() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string Endpoint::address() const {
  const bool six = host_.find(':') != std::string::npos;
  return (six ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

}  // namespace harmonia::common::metrics
