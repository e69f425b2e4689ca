#include "netsim/route_check.hpp"

#include "netsim/random.hpp"

namespace sg4 = simgrid::s4u;

namespace harmonia::netsim {

namespace {

/// SimGrid numbers switches downwards from 2 * nodes - 1, level by level (FatTreeZone).
long simgrid_id(const Fabric& f, int level, long position) {
  if (level == 0) return position;
  long id = 2 * f.nodes() - 1;
  for (int l = 1; l < level; ++l) id -= f.count(l);
  return id - position;
}

std::string describe(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : " ") + n;
  return out;
}

}  // namespace

std::pair<std::string, std::string> simgrid_link_name(const Fabric& f, const Hop& hop) {
  const Cable c = f.cable(hop.cable);
  const long parent = f.parent(c.level, c.lower, c.port);
  return {"link_from_" + std::to_string(simgrid_id(f, c.level, c.lower)) + "_" +
              std::to_string(simgrid_id(f, c.level + 1, parent)) + "_",
          hop.direction == Direction::Up ? "_UP" : "_DOWN"};
}

RouteCheck check_routes(const Fabric& f, const std::vector<sg4::Host*>& hosts, long max_pairs,
                        uint64_t seed) {
  RouteCheck check;
  const long n = f.nodes();
  const bool all = n * (n - 1) <= max_pairs;
  Rng rng = Rng::stream(seed, "route-check");
  const long pairs = all ? n * (n - 1) : max_pairs;
  std::vector<Hop> ours;
  for (long i = 0; i < pairs; ++i) {
    long src, dst;
    if (all) {
      src = i / (n - 1);
      dst = i % (n - 1);
      if (dst >= src) ++dst;
    } else {
      src = static_cast<long>(rng.below(static_cast<uint64_t>(n)));
      dst = static_cast<long>(rng.below(static_cast<uint64_t>(n - 1)));
      if (dst >= src) ++dst;
    }
    std::vector<sg4::Link*> links;
    double latency = 0;
    hosts[static_cast<size_t>(src)]->route_to(hosts[static_cast<size_t>(dst)], links, &latency);
    f.route(src, dst, ours);
    bool same = links.size() == ours.size();
    std::vector<std::string> theirs_names, our_names;
    for (size_t h = 0; h < ours.size(); ++h) {
      const auto [prefix, suffix] = simgrid_link_name(f, ours[h]);
      our_names.push_back(prefix + "*" + suffix);
      if (h < links.size()) {
        const std::string name = links[h]->get_name();
        same = same && name.rfind(prefix, 0) == 0 && name.size() > suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      }
    }
    ++check.pairs;
    if (same) continue;
    ++check.mismatches;
    if (check.examples.size() < 5) {
      for (const auto* link : links) theirs_names.push_back(link->get_name());
      check.examples.push_back("node " + std::to_string(src) + " -> " + std::to_string(dst) +
                               ": simgrid [" + describe(theirs_names) + "] ours [" +
                               describe(our_names) + "]");
    }
  }
  return check;
}

}  // namespace harmonia::netsim
