// Strategies 1a, 1b, 2a, 2b (section III-A): while several jobs are in I/O phases, one writes to
// the PFS and the others stage. Strategy 1 favours the job that entered its phase last (A stages
// as B starts), strategy 2 the first (B stages because A is writing); for three or more jobs the
// order extends first-come-first-served (Fig. 14), newest-first for strategy 1. Variant "a"
// (stage and block): a staging job may not flush until the jobs ahead of it end their phases.
// Variant "b" (stage and flush): it flushes as soon as it asks (it has no other work left).
// A job that left its phase but still holds staged data keeps its place in line until flushed.
#include <algorithm>

#include "core/coordination/strategies.hpp"

namespace harmonia::core::coordination {

namespace {

class StagingOrder final : public Coordinator {
 public:
  StagingOrder(CoordinatorConfig config, bool newest_first, bool flush_on_request)
      : Coordinator(config), newest_first_(newest_first), flush_on_request_(flush_on_request) {}

 protected:
  void plan(double) override {
    // The line: jobs in a phase, or holding data to flush, by the time they joined it.
    line_.assign(competing().begin(), competing().end());
    const auto joined = [&](JobId id) {
      const auto& j = jobs_[static_cast<size_t>(id)];
      return j.in_io ? j.io_since : j.flush_since;
    };
    std::stable_sort(line_.begin(), line_.end(), [&](JobId a, JobId b) {
      return newest_first_ ? joined(a) > joined(b) : joined(a) < joined(b);
    });
  }

  Directive strategy(JobId job, double) const override {
    Directive d;
    if (line_.empty() || line_.front() == job || !competing().contains(job))
      return d;  // at the head, or not competing: write through
    d.mode = Mode::Stage;
    d.flush_allowed = flush_on_request_;
    return d;
  }

 private:
  bool newest_first_;
  bool flush_on_request_;
  std::vector<JobId> line_;
};

}  // namespace

std::unique_ptr<Coordinator> make_staging_order(CoordinatorConfig config, bool newest_first,
                                                bool flush_on_request) {
  return std::make_unique<StagingOrder>(config, newest_first, flush_on_request);
}

}  // namespace harmonia::core::coordination
