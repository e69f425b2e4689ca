// Strategies 3a and 3b (section III-B): partition the PFS servers among jobs in proportion to
// their data (processes x bytes per process; 8 servers, 48 MB and 16 MB per process give 6 and 2).
// 3a is static: every registered job gets its part for its whole run. 3b is dynamic: a job alone
// in its I/O phase uses every server; while several are in I/O phases they split the servers.
// New files follow the directive; files already open keep their placement.
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/coordination/strategies.hpp"

namespace harmonia::core::coordination {

namespace {

class Partitioning final : public Coordinator {
 public:
  Partitioning(CoordinatorConfig config, bool dynamic) : Coordinator(config), dynamic_(dynamic) {}

 protected:
  void plan(double) override {
    if (dynamic_) {
      sharing_ = in_io_by_start();
      if (sharing_.size() < 2) sharing_.clear();  // alone: every server
    } else if (planned_version_ != membership_version()) {
      sharing_.clear();
      for (size_t i = 0; i < jobs_.size(); ++i)
        if (jobs_[i].registered) sharing_.push_back(static_cast<JobId>(i));
      planned_version_ = membership_version();
    } else {
      return;  // static: the split changes only with the membership
    }
    split_ = proportional_split(sharing_);
    position_.clear();
    for (size_t k = 0; k < sharing_.size(); ++k) position_[sharing_[k]] = k;
  }

  Directive strategy(JobId job, double) const override {
    const auto found = position_.find(job);
    if (found == position_.end()) return {};
    Directive d;
    d.servers = split_[found->second];
    return d;
  }

  bool depends_on_idle_jobs() const override { return !dynamic_; }

 private:
  bool dynamic_;
  std::vector<JobId> sharing_;  // static: by id; dynamic: by the start of their phases
  std::vector<std::vector<int>> split_;
  std::unordered_map<JobId, size_t> position_;  // where each sharing job is in `sharing_`
  std::uint64_t planned_version_ = ~0ULL;
};

}  // namespace

std::unique_ptr<Coordinator> make_partitioning(CoordinatorConfig config, bool dynamic) {
  return std::make_unique<Partitioning>(config, dynamic);
}

}  // namespace harmonia::core::coordination
