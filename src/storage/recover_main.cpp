// harmonia-recover DIR: after an application staging to DIR was killed, replay every complete
// record of its logs to the target files, ignore torn tails, and remove the logs. Running it
// again does nothing more (idempotent). Prints one JSON object per log on stdout.
//
// Who may write what (docs/security.md, "Paths and fences"): a log is opened beneath DIR with no
// symbolic link followed, and must be a regular file with one link. A log replays only what its
// owner could write: run by that user, the target is opened as usual; run by root, the target
// of a log another user owns is opened with that user's file-system identity (setfsuid,
// setfsgid and the user's groups), so the kernel refuses what the user may not create or write;
// run by anyone else, a log of another user is refused. The target's last part is never followed
// when it is a symbolic link, and it must be a regular file. A refused log is left in place,
// reported on stdout and stderr, and the exit status is 1.
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/beneath.hpp"
#include "common/identity.hpp"
#include "storage/log_format.hpp"
#include "storage/real.hpp"

using namespace harmonia::storage;

namespace {

struct LogName {
  std::string file;
  std::string host;
  long pid = 0;
  long sequence = 0;
};

/// "<host>-<pid>-<sequence>.hlog"; the host may itself contain dashes.
bool parse_name(const std::string& file, LogName& out) {
  const std::string suffix = kLogSuffix;
  if (file.size() <= suffix.size() ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string stem = file.substr(0, file.size() - suffix.size());
  const auto last = stem.rfind('-');
  if (last == std::string::npos || last == 0) return false;
  const auto middle = stem.rfind('-', last - 1);
  if (middle == std::string::npos) return false;
  try {
    out = {file, stem.substr(0, middle), std::stol(stem.substr(middle + 1, last - middle - 1)),
           std::stol(stem.substr(last + 1))};
  } catch (...) {
    return false;
  }
  return true;
}

bool process_alive(const LogName& log) {
  char host[64] = "";
  gethostname(host, sizeof(host) - 1);
  if (log.host != host) return false;  // another node's process: its owner is gone from here
  return kill(static_cast<pid_t>(log.pid), 0) == 0 || errno == EPERM;
}

/// A JSON string literal; bytes that are not printable ASCII (a damaged header's path may hold
/// anything) are escaped, so the output is always valid JSON.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte >= 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// The target found by its file handle: an O_PATH descriptor, -1 when the handle cannot be
/// used here (not root, another file system, no handles), or -2 when the file is gone (ESTALE:
/// deleted, and closed by everyone).
int open_by_handle(const LogScan& scan) {
  if (geteuid() != 0 || scan.handle.size() <= sizeof(file_handle)) return -1;
  // open_by_handle_at wants any descriptor of the file's file system: the nearest existing
  // directory on the way to the name it had.
  std::string dir = scan.target;
  int mount = -1;
  while (mount < 0 && dir.size() > 1) {
    dir = dir.substr(0, std::max<std::size_t>(dir.rfind('/'), 1));
    mount = real().open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  struct stat st {};
  if (mount < 0 || fstat(mount, &st) != 0 || st.st_dev != scan.device) {
    if (mount >= 0) real().close(mount);
    return -1;
  }
  std::string copy = scan.handle;
  auto* handle = reinterpret_cast<file_handle*>(copy.data());
  const int fd = handle->handle_bytes == copy.size() - sizeof(file_handle)
                     ? open_by_handle_at(mount, handle, O_PATH | O_CLOEXEC)
                     : -1;
  const int error = errno;
  real().close(mount);
  if (fd < 0) return error == ESTALE ? -2 : -1;
  return fd;
}

/// Opens the target of a log owned by `owner` for writing: never through a symbolic link at its
/// last part, only a regular file, and, run by root for another user's log, as that user. A log
/// that knows its file's identity writes only to that file: found by its handle wherever the
/// program renamed it (root), else by its latest name and checked by its inode; one that does
/// not (written before identities were kept) creates a missing file. The descriptor, or -1 and
/// `why`; `gone` when the file was deleted (nothing to replay).
int open_target(const LogScan& scan, uid_t owner, std::string& why, bool& gone) {
  const std::string& path = scan.target;
  const int by_handle = scan.identified ? open_by_handle(scan) : -1;
  if (by_handle == -2) {
    gone = true;
    return -1;
  }
  std::optional<harmonia::common::ActAs> as_owner;
  if (geteuid() == 0 && owner != 0) {
    // The owner's groups come from the passwd and group databases: a uid with no entry is
    // refused rather than given groups it may not have.
    if (!getpwuid(owner)) {
      if (by_handle >= 0) real().close(by_handle);
      why = "refused: cannot act as the log's owner: uid " + std::to_string(owner) +
            " has no passwd entry (its groups are unknown)";
      return -1;
    }
    as_owner.emplace(owner, 0);  // the group: the passwd entry's
    if (!as_owner->ok()) {
      if (by_handle >= 0) real().close(by_handle);
      why = "refused: cannot act as the log's owner: " + as_owner->why();
      return -1;
    }
  }
  // O_NONBLOCK: a FIFO there cannot hold the recovery (and is refused below).
  const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  const int fd =
      by_handle >= 0
          ? real().open(("/proc/self/fd/" + std::to_string(by_handle)).c_str(), flags & ~O_NOFOLLOW)
          : real().open(path.c_str(), flags | (scan.identified ? 0 : O_CREAT), 0644);
  const int error = errno;
  as_owner.reset();
  if (by_handle >= 0) real().close(by_handle);
  if (fd < 0) {
    if (error == ELOOP)
      why = "refused: " + path + " is a symbolic link (never followed)";
    else if (owner != geteuid() && (error == EACCES || error == EPERM))
      why = "refused: uid " + std::to_string(owner) + ", the log's owner, may not write " + path +
            " (" + std::strerror(error) + ")";
    else if (error == ENOENT && scan.identified)
      why = "refused: " + path + " is gone (renamed or deleted by another program); the log " +
            "stays: run harmonia-recover as root to find the file by its handle";
    else
      why = "error: cannot write " + path + ": " + std::strerror(error);
    return -1;
  }
  struct stat st {};
  if (fstatat(fd, "", &st, AT_EMPTY_PATH) != 0 || !S_ISREG(st.st_mode)) {
    real().close(fd);
    why = "refused: " + path + " is not a regular file";
    return -1;
  }
  if (scan.identified && (st.st_ino != scan.inode || st.st_dev != scan.device)) {
    real().close(fd);
    why = "refused: " + path + " is not the file the program wrote (renamed or replaced by " +
          "another program since); the log stays: run harmonia-recover as root to find the " +
          "file by its handle";
    return -1;
  }
  return fd;
}

/// Why the log `fd` (named `path`) may not be replayed by this process, or "" when it may.
std::string refusal(int fd, const std::string& path, uid_t& owner) {
  struct stat st {};
  if (fstatat(fd, "", &st, AT_EMPTY_PATH) != 0)
    return "refused: " + path + ": " + std::strerror(errno);
  if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
    return "refused: " + path + " is not a regular file with one link";
  owner = st.st_uid;
  if (geteuid() != 0 && owner != geteuid())
    return "refused: " + path + " is owned by uid " + std::to_string(owner) +
           ", not by this user (uid " + std::to_string(geteuid()) +
           "): run harmonia-recover as its owner, or as root";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: harmonia-recover STAGE_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  // Every log is opened beneath this descriptor, with no symbolic link followed.
  const int dir_fd = real().open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* listing = dir_fd < 0 ? nullptr : fdopendir(real().dup(dir_fd));
  if (!listing) {
    std::fprintf(stderr, "harmonia-recover: %s: %s\n", dir.c_str(), std::strerror(errno));
    return 2;
  }
  std::vector<LogName> logs;
  while (const dirent* entry = readdir(listing)) {
    LogName name;
    if (parse_name(entry->d_name, name)) logs.push_back(name);
  }
  closedir(listing);
  // One process's logs in creation order; processes in pid order (their relative order is
  // unknown: they should not have written the same bytes of the same file).
  std::sort(logs.begin(), logs.end(), [](const LogName& a, const LogName& b) {
    return std::tie(a.host, a.pid, a.sequence) < std::tie(b.host, b.pid, b.sequence);
  });

  int failures = 0;
  for (const auto& log : logs) {
    const std::string path = dir + "/" + log.file;
    std::string status = "replayed";
    LogScan scan;
    if (process_alive(log)) {
      status = "skipped: its process is still running";
    } else if (const int fd =
                   harmonia::common::open_beneath(dir_fd, log.file, O_RDONLY | O_NONBLOCK);
               fd < 0) {
      status = errno == ELOOP ? "refused: " + path + " is a symbolic link (never followed)"
                              : "error: " + harmonia::common::beneath_error(path, errno);
      ++failures;
    } else if (uid_t owner = 0; !(status = refusal(fd, path, owner)).empty()) {
      real().close(fd);
      ++failures;
    } else {
      status = "replayed";
      // First what the program did to the file's name (it may come after data records), then
      // the data, to the file it names.
      LogScan names;
      scan_log(fd, names, [](const RecordHeader&, const char*) { return true; });
      int target = -1;
      bool write_failed = false, gone = names.unlinked;
      std::string open_failed;
      scan_log(fd, scan, [&](const RecordHeader& record, const char* data) {
        if (gone) return false;
        if (target < 0 && open_failed.empty())
          target = open_target(names, owner, open_failed, gone);
        if (gone) return false;
        size_t done = 0;
        while (target >= 0 && done < record.length) {
          const ssize_t n = real().pwrite64(target, data + done, record.length - done,
                                            static_cast<off64_t>(record.offset + done));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          done += static_cast<size_t>(n);
        }
        write_failed = done < record.length;
        return !write_failed;
      });
      real().close(fd);
      if (scan.error.empty()) scan.target = names.target;  // where its data belongs now
      if (!scan.error.empty()) {
        status = "error: " + scan.error;
        scan.target.clear();  // whatever the damaged header said is not a path to trust
        ++failures;
      } else if (gone) {
        status = names.unlinked ? "dropped: the program deleted " + scan.target
                                : "dropped: " + scan.target + " was deleted since";
        unlinkat(dir_fd, log.file.c_str(), 0);  // a deleted file never comes back
      } else if (!open_failed.empty()) {
        status = open_failed;  // the log stays for its owner, or for a fixed target
        ++failures;
      } else if (write_failed || (target < 0 && scan.records > 0) ||
                 (target >= 0 && real().fsync(target) != 0)) {
        status = std::string("error: cannot write ") + scan.target + ": " + std::strerror(errno);
        ++failures;
      } else {
        unlinkat(dir_fd, log.file.c_str(), 0);  // everything complete is in the file now
      }
      if (target >= 0) real().close(target);
    }
    std::printf(
        "{\"log\": %s, \"target\": %s, \"records\": %llu, \"bytes\": %llu, \"torn_tail\": %s, "
        "\"status\": %s}\n",
        quoted(path).c_str(), quoted(scan.target).c_str(),
        static_cast<unsigned long long>(scan.records), static_cast<unsigned long long>(scan.bytes),
        scan.torn_tail ? "true" : "false", quoted(status).c_str());
    if (status.compare(0, 8, "refused:") == 0)
      std::fprintf(stderr, "harmonia-recover: %s: %s\n", path.c_str(), status.c_str());
  }
  if (logs.empty()) std::fprintf(stderr, "harmonia-recover: %s: no staging logs\n", dir.c_str());
  return failures > 0 ? 1 : 0;
}
