// Baseline: no coordination. Every job writes straight to every PFS server whenever it likes,
// and the applications interfere (the paper's "default case with interference").
#include "core/coordination/strategies.hpp"

namespace harmonia::core::coordination {

namespace {
class NoCoordination final : public Coordinator {
 public:
  using Coordinator::Coordinator;

 protected:
  Directive strategy(JobId, double) const override { return {}; }
};
}  // namespace

std::unique_ptr<Coordinator> make_no_coordination(CoordinatorConfig config) {
  return std::make_unique<NoCoordination>(config);
}

}  // namespace harmonia::core::coordination
