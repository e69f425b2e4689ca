// Strategies 3a and 3b (section III-B): partition the PFS servers among jobs in proportion to
// their data (processes x bytes per process; 8 servers, 48 MB and 16 MB per process give 6 and 2).
// 3a is static: every registered job gets its part for its whole run. 3b is dynamic: a job alone
// in its I/O phase uses every server; while several are in I/O phases they split the servers.
// New files follow the directive; files already open keep their placement.
#include <algorithm>

#include "core/coordination/strategies.hpp"

namespace harmonia::core::coordination {

namespace {

class Partitioning final : public Coordinator {
 public:
  Partitioning(CoordinatorConfig config, bool dynamic) : Coordinator(config), dynamic_(dynamic) {}

 protected:
  Directive strategy(JobId job, double) const override {
    std::vector<JobId> sharing;
    if (dynamic_) {
      sharing = in_io_by_start();
      if (sharing.size() < 2) return {};
    } else {
      for (size_t i = 0; i < jobs_.size(); ++i)
        if (jobs_[i].registered) sharing.push_back(static_cast<JobId>(i));
    }
    const auto it = std::find(sharing.begin(), sharing.end(), job);
    if (it == sharing.end()) return {};
    Directive d;
    d.servers = proportional_split(sharing)[static_cast<size_t>(it - sharing.begin())];
    return d;
  }

 private:
  bool dynamic_;
};

}  // namespace

std::unique_ptr<Coordinator> make_partitioning(CoordinatorConfig config, bool dynamic) {
  return std::make_unique<Partitioning>(config, dynamic);
}

}  // namespace harmonia::core::coordination
