#pragma once
// PFS server partitioning for real (BBIO strategies 3a/3b): the daemon's directive names the PFS
// servers a job's new files go to, and a server adapter places them. The embedded adapter treats
// the subdirectories of HARMONIA_PFS_ROOT as the servers: a file created as ROOT/NAME is written
// to ROOT/SERVER/NAME, and ROOT/NAME becomes a symbolic link to it, so every program still finds
// the file where it asked. A Lustre adapter would instead create the file with a layout on the
// chosen OSTs (llapi_file_open_param with an OST list, or a pool) and leave the path alone.

#include <cstdint>
#include <string>
#include <vector>

namespace harmonia::bbio {

class ServerAdapter {
 public:
  virtual ~ServerAdapter() = default;
  /// `absolute_path` is about to be created: the path to create instead, or "" to create it
  /// where asked. `servers` are indices into the adapter's servers; empty means all of them.
  virtual std::string place(const std::string& absolute_path,
                            const std::vector<uint32_t>& servers) = 0;
};

/// The adapter HARMONIA_PFS_ROOT selects (read once), or nullptr.
ServerAdapter* server_adapter();

/// For the open wrappers: the path to open instead of `path` (relative to `dirfd`) opened with
/// `flags`, or "" to open `path` itself.
std::string placed_path(int dirfd, const char* path, int flags);

}  // namespace harmonia::bbio
