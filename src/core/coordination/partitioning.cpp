// Strategies 3a and 3b (section III-B): partition the PFS servers among jobs in proportion to
// their data (processes x bytes per process; 8 servers, 48 MB and 16 MB per process give 6 and 2).
// 3a is static: every registered job gets its part for its whole run. 3b is dynamic: a job alone
// in its I/O phase uses every server; while several are in I/O phases they split the servers
// first come, first served (Fig. 14): each later comer takes its part of the servers of the job
// that came just before it, so with three equal jobs on 8 servers A keeps 4 and B and C get 2.
// New files follow the directive; files already open keep their placement.
#include <algorithm>
#include <cmath>
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
    split_ = dynamic_ ? first_come_split(sharing_) : proportional_split(sharing_);
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

  /// Servers of jobs in the order they entered their phases: the first has them all; each next
  /// one takes from its predecessor's a part in proportion to their data, at least one server
  /// and leaving at least one (with a single server, the two share it).
  std::vector<std::vector<int>> first_come_split(const std::vector<JobId>& by_start) const {
    const auto weight = [&](JobId id) {
      const auto& info = jobs_[static_cast<size_t>(id)].info;
      return std::max(1.0, info.processes * info.bytes_per_process);
    };
    std::vector<std::vector<int>> out;
    for (size_t k = 0; k < by_start.size(); ++k) {
      if (k == 0) {
        out.emplace_back();
        for (int s = 0; s < config_.pfs_servers; ++s) out.back().push_back(s);
        continue;
      }
      std::vector<int>& previous = out.back();
      const auto n = static_cast<long>(previous.size());
      if (n < 2) {
        out.push_back(previous);
        continue;
      }
      const double share = weight(by_start[k]) / (weight(by_start[k - 1]) + weight(by_start[k]));
      const long given = std::clamp(std::lround(static_cast<double>(n) * share), 1L, n - 1);
      std::vector<int> taken(previous.end() - given, previous.end());
      previous.resize(static_cast<size_t>(n - given));
      out.push_back(std::move(taken));
    }
    return out;
  }

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
