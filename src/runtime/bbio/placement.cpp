#include "runtime/bbio/placement.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "runtime/bbio/agent.hpp"
#include "runtime/bbio/config.hpp"
#include "runtime/bbio/report.hpp"
#include "storage/real.hpp"

namespace harmonia::bbio {

using storage::real;

namespace {

/// The subdirectories of a root directory are the servers (sorted by name).
class SubdirectoryAdapter final : public ServerAdapter {
 public:
  SubdirectoryAdapter(std::string root, std::vector<std::string> servers)
      : root_(std::move(root)),
        servers_(std::move(servers)),
        next_(static_cast<unsigned>(getpid())) {}

  std::string place(const std::string& absolute_path,
                    const std::vector<uint32_t>& chosen) override {
    const auto slash = absolute_path.rfind('/');
    const std::string name = absolute_path.substr(slash + 1);
    if (name.empty() || name == "." || name == ".." ||
        std::find(servers_.begin(), servers_.end(), name) != servers_.end())
      return "";
    char parent[PATH_MAX];
    if (!realpath(slash == 0 ? "/" : absolute_path.substr(0, slash).c_str(), parent) ||
        parent != root_)
      return "";
    struct stat st {};
    if (lstat(absolute_path.c_str(), &st) == 0 || errno != ENOENT) return "";  // exists: open it
    std::vector<uint32_t> subset;
    for (uint32_t s : chosen)
      if (s < servers_.size()) subset.push_back(s);
    const unsigned turn = next_++;
    const std::string& server =
        servers_[subset.empty() ? turn % servers_.size() : subset[turn % subset.size()]];
    // The link first: if another process creates the same name meanwhile, its link wins and we
    // open through it.
    if (symlink((server + "/" + name).c_str(), absolute_path.c_str()) != 0) return "";
    return root_ + "/" + server + "/" + name;
  }

 private:
  std::string root_;
  std::vector<std::string> servers_;
  std::atomic<unsigned> next_;
};

ServerAdapter* make_adapter() {
  // An environment the library cannot use leaves placement to the application too.
  const char* root = environment().pfs_root.c_str();
  if (!*root || !environment().errors.empty()) return nullptr;
  char resolved[PATH_MAX];
  DIR* dir = realpath(root, resolved) ? opendir(resolved) : nullptr;
  if (!dir) {
    report(std::string("HARMONIA_PFS_ROOT=") + root +
           ": not a readable directory; files are placed as the application asks");
    return nullptr;
  }
  std::vector<std::string> servers;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (stat((std::string(resolved) + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      servers.push_back(name);
  }
  closedir(dir);
  if (servers.empty()) {
    report(std::string("HARMONIA_PFS_ROOT=") + root +
           ": has no server subdirectories; files are placed as the application asks");
    return nullptr;
  }
  std::sort(servers.begin(), servers.end());
  return new SubdirectoryAdapter(resolved, std::move(servers));
}

}  // namespace

ServerAdapter* server_adapter() {
  static ServerAdapter* adapter = make_adapter();  // never destroyed: used until exit
  return adapter;
}

std::string placed_path(int dirfd, const char* path, int flags) {
  if (!(flags & O_CREAT) || !path) return "";
  ServerAdapter* adapter = server_adapter();
  if (!adapter) return "";
  // A path the kernel cannot read (EFAULT) is left to the real open, which says so.
  struct stat64 st {};
  if (real().fstatat64(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == EFAULT) return "";
  if (!*path) return "";
  std::string absolute;
  if (path[0] == '/') {
    absolute = path;
  } else if (dirfd == AT_FDCWD) {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd))) return "";
    absolute = std::string(cwd) + "/" + path;
  } else {
    return "";  // relative to another directory: left alone
  }
  return adapter->place(absolute, agent::servers());
}

}  // namespace harmonia::bbio
