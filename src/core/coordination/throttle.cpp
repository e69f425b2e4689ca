// Strategy "throttle": I/O throttling (Yang et al., ICPP 2018, section 6.3, carried from the
// network to the host). While several jobs are in I/O phases, every job but the one that entered
// its phase first must leave `throttle_gap` seconds between the starts of two writes, so the
// first comer keeps most of the bandwidth and the others trickle. Nobody stages.
#include <stdexcept>

#include "core/coordination/strategies.hpp"

namespace harmonia::core::coordination {

namespace {

class Throttle final : public Coordinator {
 public:
  explicit Throttle(CoordinatorConfig config) : Coordinator(config) {
    if (!(config_.throttle_gap > 0)) throw std::invalid_argument("throttle_gap must be > 0");
  }

 protected:
  void plan(double) override {
    const auto in_io = in_io_by_start();
    first_ = in_io.size() >= 2 ? std::optional<JobId>(in_io.front()) : std::nullopt;
  }

  Directive strategy(JobId job, double) const override {
    Directive d;
    if (first_ && *first_ != job && jobs_[static_cast<size_t>(job)].in_io)
      d.min_request_gap = config_.throttle_gap;
    return d;
  }

 private:
  std::optional<JobId> first_;  // set only while several jobs are in I/O phases
};

}  // namespace

std::unique_ptr<Coordinator> make_throttle(CoordinatorConfig config) {
  return std::make_unique<Throttle>(config);
}

}  // namespace harmonia::core::coordination
