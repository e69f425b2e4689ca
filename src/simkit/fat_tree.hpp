#pragma once
/// @file A fat-tree's shape as SimGrid's `create_fatTree_zone` takes it. No SimGrid.

#include <vector>

namespace harmonia::simkit {

/// XGFT(levels; down; up) with `link_count` cables between related elements. A switch is the
/// one-level tree {1, {hosts}, {1}, {1}}.
struct FatTree {
  unsigned levels = 1;
  std::vector<unsigned> down, up, link_count;
};

}  // namespace harmonia::simkit
