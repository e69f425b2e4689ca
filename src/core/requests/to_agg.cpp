// TO-agg, time order with aggregation (AGIOS): the oldest request is issued first, merged with
// the queued requests contiguous to it (same file and operation) up to `to-agg.max_requests`
// requests and `to-agg.max_bytes` bytes, whatever their arrival order.
#include "core/requests/schedulers.hpp"

namespace harmonia::core::requests {

std::unique_ptr<RequestScheduler> make_to_agg(OptionReader& options) {
  const AggregationLimits limits = options.aggregation();
  return make_time_order("to-agg", limits);
}

}  // namespace harmonia::core::requests
