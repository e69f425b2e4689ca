#include "config/site.hpp"
#include "core/coordination/coordinator.hpp"
#include "core/lookahead.hpp"
#include "core/registry.hpp"

namespace harmonia::config {

Names Names::registered() {
  return {core::coordination::coordinator_names(), core::coordination::flush_order_names(),
          core::policy_names(), core::auto_objective_names()};
}

}  // namespace harmonia::config
