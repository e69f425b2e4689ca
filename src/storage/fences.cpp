#include "storage/fences.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <string>
#include <vector>

#include "common/beneath.hpp"
#include "storage/real.hpp"

namespace harmonia::storage::fences {

namespace {

/// NODE's fence directory, relative to ROOT.
std::string node_dir(const std::string& node) {
  return std::string(kReservedDir) + "/fences/" + node;
}

/// Fence directories are sticky, like /tmp: a user cannot delete or rename another's fence.
constexpr mode_t kDirMode = 01777;

/// The directory of `path` (relative to ROOT) opened beneath ROOT, made when `make`; -1 with
/// errno.
int open_dir_of(int root, const std::string& path, bool make) {
  const std::string dir = common::split_last(path).first;
  return make ? common::make_dirs_beneath(root, dir, kDirMode, O_PATH)
              : common::open_beneath(root, dir, O_PATH | O_DIRECTORY);
}

bool valid_node(const std::string& node) {
  return !node.empty() && node.find('/') == std::string::npos && node != "." && node != "..";
}

}  // namespace

bool reserved(const std::string& name) {
  const std::string dir = kReservedDir;
  return name.compare(0, dir.size(), dir) == 0 &&
         (name.size() == dir.size() || name[dir.size()] == '/');
}

int lock(int root, const std::string& node) {
  if (!valid_node(node)) {
    errno = EINVAL;
    return -1;
  }
  const std::string path = node_dir(node) + ".lock";
  const int dir = open_dir_of(root, path, true);
  if (dir < 0) return -1;
  // Read-only: flock needs no more, and every user can open a lock file another user made.
  const int fd = common::open_beneath(dir, common::split_last(path).second,
                                      O_RDONLY | O_CREAT | O_NONBLOCK, 0644);
  common::close_fd(dir);
  if (fd < 0) return -1;
  while (flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    common::close_fd(fd);
    return -1;
  }
  return fd;
}

void unlock(int fd) {
  common::close_fd(fd);  // closing the only descriptor releases the flock
}

int prepare(int root, const std::string& node) {
  if (!valid_node(node)) return EINVAL;
  const int made = common::make_dirs_beneath(root, node_dir(node), kDirMode, O_PATH);
  if (made < 0) return errno;
  common::close_fd(made);
  for (const std::string& dir :
       {std::string(kReservedDir), std::string(kReservedDir) + "/fences", node_dir(node)}) {
    const int fd = common::open_beneath(root, dir, O_RDONLY | O_DIRECTORY);
    struct stat st {};
    // Every user's job must be able to fence (made under an umask that took the bits off, a
    // directory would refuse them); others' fences stay safe with the sticky bit.
    if (fd >= 0 && fstatat(fd, "", &st, AT_EMPTY_PATH) == 0 && (st.st_mode & 07777) != kDirMode)
      (void)fchmod(fd, kDirMode);
    common::close_fd(fd);
  }
  return 0;
}

bool append(int root, const std::string& node, const std::string& file, Range range) {
  if (!valid_node(node)) {
    errno = EINVAL;
    return false;
  }
  const std::string path = node_dir(node) + "/" + file;
  const int dir = open_dir_of(root, path, true);
  if (dir < 0) return false;
  const int fd = common::open_beneath(dir, common::split_last(path).second,
                                      O_WRONLY | O_CREAT | O_NONBLOCK, 0644);
  common::close_fd(dir);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = fstatat(fd, "", &st, AT_EMPTY_PATH) == 0;
  if (ok && !S_ISREG(st.st_mode)) {
    ok = false;
    errno = EINVAL;
  }
  const std::uint64_t entry[2] = {range.offset, range.length};
  ok = ok &&
       real().pwrite(fd, entry, sizeof(entry), st.st_size) == static_cast<ssize_t>(sizeof(entry));
  const int error = errno;
  // A short entry would shift every later one: the fence goes back to what it was.
  if (!ok && S_ISREG(st.st_mode)) (void)real().ftruncate(fd, st.st_size);
  common::close_fd(fd);
  errno = error;
  return ok;
}

std::vector<Range> read(int root, const std::string& node, const std::string& file,
                        uid_t target_owner, std::string* ignored) {
  std::vector<Range> ranges;
  if (!valid_node(node)) return ranges;
  const std::string path = node_dir(node) + "/" + file;
  // O_NONBLOCK: a FIFO planted there cannot hold the drain (and is refused below).
  const int fd = common::open_beneath(root, path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT && ignored) *ignored = common::beneath_error(path, errno) + ": ignored";
    return ranges;
  }
  struct stat st {};
  const bool stated = fstatat(fd, "", &st, AT_EMPTY_PATH) == 0;
  // A fence makes the drain skip acknowledged bytes: only someone who could have written the
  // target file's newer bytes there itself may ask for that.
  const bool trusted = stated && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
                       (st.st_uid == 0 || st.st_uid == geteuid() || st.st_uid == target_owner);
  if (!trusted) {
    if (ignored)
      *ignored = path + ": ignored: not a regular file with one link owned by root, by uid " +
                 std::to_string(geteuid()) + " or by the file's owner (uid " +
                 std::to_string(target_owner) + ")" +
                 (stated ? "; it is owned by uid " + std::to_string(st.st_uid) : "");
    common::close_fd(fd);
    return ranges;
  }
  std::uint64_t entry[2];
  while (real().read(fd, entry, sizeof(entry)) == static_cast<ssize_t>(sizeof(entry)))
    if (entry[1] > 0 && entry[0] + entry[1] > entry[0]) ranges.push_back({entry[0], entry[1]});
  common::close_fd(fd);
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.offset < b.offset; });
  std::vector<Range> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.offset <= merged.back().offset + merged.back().length) {
      const std::uint64_t end =
          std::max(merged.back().offset + merged.back().length, r.offset + r.length);
      merged.back().length = end - merged.back().offset;
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

void remove(int root, const std::string& node, const std::string& file) {
  if (!valid_node(node)) return;
  const std::string path = node_dir(node) + "/" + file;
  const int dir = open_dir_of(root, path, false);
  if (dir < 0) return;
  (void)real().unlinkat(dir, common::split_last(path).second.c_str(),
                        0);  // a link, never its target
  common::close_fd(dir);
}

std::size_t remove_unless(int root, const std::string& node,
                          const std::function<bool(const std::string& file)>& keep) {
  if (!valid_node(node)) return 0;
  std::size_t removed = 0;
  // `dir`: a descriptor opened beneath ROOT with no link followed; every name in it is looked
  // at, opened or unlinked relative to it, so a link swapped in meanwhile is never followed.
  const std::function<void(int, const std::string&, int)> walk =
      [&](int dir, const std::string& relative, int depth) {
        DIR* listing = fdopendir(dir);
        if (!listing) {
          common::close_fd(dir);
          return;
        }
        std::vector<std::string> files, dirs;
        while (const dirent* entry = readdir(listing)) {
          const std::string name = entry->d_name;
          if (name == "." || name == "..") continue;
          struct stat st {};
          if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
          if (S_ISDIR(st.st_mode))
            dirs.push_back(name);
          else if (S_ISREG(st.st_mode))
            files.push_back(name);
        }
        for (const auto& name : files) {
          const std::string file = relative.empty() ? name : relative + "/" + name;
          if (!keep(file) && real().unlinkat(dir, name.c_str(), 0) == 0) ++removed;
        }
        for (const auto& name : dirs) {
          if (depth >= 512) break;  // bounds the descriptors held at once
          const int child = common::open_beneath(dir, name, O_RDONLY | O_DIRECTORY);
          if (child >= 0) walk(child, relative.empty() ? name : relative + "/" + name, depth + 1);
        }
        closedir(listing);  // closes `dir`
      };
  const int top = common::open_beneath(root, node_dir(node), O_RDONLY | O_DIRECTORY);
  if (top >= 0) walk(top, "", 0);
  return removed;
}

std::vector<Range> uncovered(std::uint64_t offset, std::uint64_t length,
                             const std::vector<Range>& fenced) {
  std::vector<Range> out;
  std::uint64_t at = offset;
  const std::uint64_t end = offset + length;
  for (const auto& f : fenced) {
    if (f.offset + f.length <= at) continue;
    if (f.offset >= end) break;
    if (f.offset > at) out.push_back({at, f.offset - at});
    at = std::max(at, f.offset + f.length);
    if (at >= end) break;
  }
  if (at < end) out.push_back({at, end - at});
  return out;
}

}  // namespace harmonia::storage::fences
