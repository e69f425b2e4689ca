#pragma once
/// @file Compares Fabric's D-mod-k routes with the routes SimGrid computes on the platform that
/// build_fabric made, link by link. Used by `harmonia-netsim --check-routes` (and its tests).

#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "netsim/fabric.hpp"

namespace harmonia::netsim {

struct RouteCheck {
  long pairs = 0;
  long mismatches = 0;
  std::vector<std::string> examples;  ///< the first few mismatches, readable
};

/// SimGrid 3.32's name of a hop's link, without its serial number: "link_from_C_P_" + "UP" or
/// "DOWN", where C and P are SimGrid's ids of the child (a node's position) and parent switch.
std::pair<std::string, std::string> simgrid_link_name(const Fabric& fabric, const Hop& hop);

/// Check every ordered pair of distinct nodes if there are at most `max_pairs` of them, else
/// `max_pairs` pairs drawn with `seed`.
RouteCheck check_routes(const Fabric& fabric, const std::vector<simgrid::s4u::Host*>& hosts,
                        long max_pairs, uint64_t seed);

}  // namespace harmonia::netsim
