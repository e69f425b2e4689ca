#include "runtime/bbio/fences.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>

#include "runtime/bbio/real.hpp"

namespace harmonia::bbio::fences {

namespace {

/// mkdir -p of the directories above `path`.
bool make_parents(const std::string& path) {
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    if (mkdir(path.substr(0, at).c_str(), 0755) != 0 && errno != EEXIST) return false;
  return true;
}

std::string node_dir(const std::string& root, const std::string& node) {
  return root + "/" + kReservedDir + "/fences/" + node;
}

std::string fence_path(const std::string& root, const std::string& node, const std::string& file) {
  return node_dir(root, node) + "/" + file;
}

bool write_all(int fd, const void* data, std::size_t length) {
  const char* p = static_cast<const char*>(data);
  while (length > 0) {
    const ssize_t n = real().write(fd, p, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    length -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

bool reserved(const std::string& name) {
  const std::string dir = kReservedDir;
  return name.compare(0, dir.size(), dir) == 0 &&
         (name.size() == dir.size() || name[dir.size()] == '/');
}

int lock(const std::string& root, const std::string& node) {
  const std::string path = node_dir(root, node) + ".lock";
  if (!make_parents(path)) return -1;
  const int fd = real().open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
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
            const Entry& entry) {
  const std::string path = fence_path(root, node, file);
  if (!make_parents(path)) return false;
  const int fd = real().open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const std::uint64_t raw[3] = {entry.log, entry.offset, entry.length};
  const bool ok = write_all(fd, raw, sizeof(raw));
  const int error = errno;
  real().close(fd);
  errno = error;
  return ok;
}

std::vector<Entry> read(const std::string& root, const std::string& node, const std::string& file) {
  std::vector<Entry> entries;
  const int fd = real().open(fence_path(root, node, file).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return entries;
  std::uint64_t raw[3];
  while (real().read(fd, raw, sizeof(raw)) == static_cast<ssize_t>(sizeof(raw)))
    if (raw[2] > 0 && raw[1] + raw[2] > raw[1]) entries.push_back({raw[0], raw[1], raw[2]});
  real().close(fd);
  return entries;
}

void keep(const std::string& root, const std::string& node, const std::string& file,
          const std::set<std::uint64_t>& logs) {
  const std::vector<Entry> entries = read(root, node, file);
  std::vector<std::uint64_t> kept;
  for (const auto& e : entries)
    if (logs.count(e.log)) kept.insert(kept.end(), {e.log, e.offset, e.length});
  const std::string path = fence_path(root, node, file);
  if (kept.size() == 3 * entries.size()) return;
  if (kept.empty()) {
    (void)unlink(path.c_str());
    return;
  }
  // Replaced whole: a reader never sees half of it. The caller holds the node's lock, so one
  // temporary per node will do.
  const std::string temporary = node_dir(root, node) + ".rewrite";
  const int fd = real().open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool ok = write_all(fd, kept.data(), kept.size() * sizeof(std::uint64_t));
  real().close(fd);
  if (!ok || rename(temporary.c_str(), path.c_str()) != 0) (void)unlink(temporary.c_str());
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
      if (stat((dir + "/" + name).c_str(), &st) != 0) continue;
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

std::vector<Range> ranges_of(const std::vector<Entry>& entries, std::uint64_t log) {
  std::vector<Range> ranges;
  for (const auto& e : entries)
    if (e.log == log) ranges.push_back({e.offset, e.length});
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
