#include "runtime/bbio/fences.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>

#include "common/paths.hpp"
#include "runtime/bbio/real.hpp"

namespace harmonia::bbio::fences {

namespace {

std::string node_dir(const std::string& root, const std::string& node) {
  return root + "/" + kReservedDir + "/fences/" + node;
}

std::string fence_path(const std::string& root, const std::string& node, const std::string& file) {
  return node_dir(root, node) + "/" + file;
}

}  // namespace

bool reserved(const std::string& name) {
  const std::string dir = kReservedDir;
  return name.compare(0, dir.size(), dir) == 0 &&
         (name.size() == dir.size() || name[dir.size()] == '/');
}

int lock(const std::string& root, const std::string& node) {
  const std::string path = node_dir(root, node) + ".lock";
  if (!common::make_parents(path, 0777)) return -1;
  // Read-only: flock needs no more, and every user can open a lock file another user made.
  const int fd = real().open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return -1;
  while (flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int error = errno;
    real().close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

void unlock(int fd) {
  if (fd >= 0) real().close(fd);  // closing the only descriptor releases the flock
}

bool append(const std::string& root, const std::string& node, const std::string& file,
            Range range) {
  const std::string path = fence_path(root, node, file);
  if (!common::make_parents(path, 0777)) return false;
  const int fd = real().open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = real().fstat(fd, &st) == 0;
  const std::uint64_t entry[2] = {range.offset, range.length};
  ok = ok &&
       real().pwrite(fd, entry, sizeof(entry), st.st_size) == static_cast<ssize_t>(sizeof(entry));
  const int error = errno;
  // A short entry would shift every later one: the fence goes back to what it was.
  if (!ok) (void)real().ftruncate(fd, st.st_size);
  real().close(fd);
  errno = error;
  return ok;
}

std::vector<Range> read(const std::string& root, const std::string& node, const std::string& file) {
  std::vector<Range> ranges;
  const int fd =
      real().open(fence_path(root, node, file).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ranges;
  std::uint64_t entry[2];
  while (real().read(fd, entry, sizeof(entry)) == static_cast<ssize_t>(sizeof(entry)))
    if (entry[1] > 0 && entry[0] + entry[1] > entry[0]) ranges.push_back({entry[0], entry[1]});
  real().close(fd);
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

void remove(const std::string& root, const std::string& node, const std::string& file) {
  (void)unlink(fence_path(root, node, file).c_str());  // removes a link, never its target
}

std::vector<std::string> fenced_files(const std::string& root, const std::string& node) {
  std::vector<std::string> files;
  const std::function<void(const std::string&)> walk = [&](const std::string& relative) {
    const std::string dir = node_dir(root, node) + (relative.empty() ? "" : "/" + relative);
    DIR* listing = opendir(dir.c_str());
    if (!listing) return;
    while (const dirent* entry = readdir(listing)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      const std::string child = relative.empty() ? name : relative + "/" + name;
      struct stat st {};
      if (lstat((dir + "/" + name).c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode))
        walk(child);
      else if (S_ISREG(st.st_mode))
        files.push_back(child);
    }
    closedir(listing);
  };
  walk("");
  return files;
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

}  // namespace harmonia::bbio::fences
