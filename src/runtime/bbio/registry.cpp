#include "runtime/bbio/registry.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/bbio/phases.hpp"
#include "runtime/bbio/real.hpp"

namespace harmonia::bbio {

namespace {

constexpr int kMaxFd = 1 << 16;  // descriptors above this are never staged

struct State {
  std::mutex mutex;  // guards everything below but `slots`
  Config config;
  bool final = false;
  std::vector<std::unique_ptr<StagedFile>> files;
  // Released files stay allocated: a thread racing a close may still hold the pointer.
  std::vector<std::unique_ptr<StagedFile>> retired;
  std::atomic<StagedFile*> slots[kMaxFd] = {};
};

std::atomic<State*> state_ptr{nullptr};
pthread_once_t state_once = PTHREAD_ONCE_INIT;

void make_state() {
  // Never destroyed: wrappers may run during and after static destruction.
  auto* s = new State();
  std::string error;
  s->config = config_from_environment(error);
  state_ptr.store(s, std::memory_order_release);
  if (!error.empty()) report(error + "; staging disabled, writes go straight to their files");
}

State& state() {
  pthread_once(&state_once, make_state);
  return *state_ptr.load(std::memory_order_acquire);
}

void release(State& s, StagedFile* file) {
  for (auto it = s.files.begin(); it != s.files.end(); ++it)
    if (it->get() == file) {
      {
        std::lock_guard file_lock(file->mutex);
        file->release();
      }
      s.retired.push_back(std::move(*it));
      s.files.erase(it);
      return;
    }
}

bool in_range(int fd) { return fd >= 0 && fd < kMaxFd; }

int adopt(State& s, int fd, const std::string& path, int flags) {
  std::string error;
  auto file = StagedFile::create(fd, path, flags, s.config, error);
  if (!file) {
    report(error + "; writing it directly");
    errno = EIO;
    return -1;
  }
  file->app_fds = 1;
  s.slots[fd].store(file.get(), std::memory_order_release);
  s.files.push_back(std::move(file));
  return 0;
}

std::string path_of(int fd) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char target[4096];
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

}  // namespace

StagedFile* staged(int fd) {
  State* s = state_ptr.load(std::memory_order_acquire);
  if (!in_range(fd) || !s) return nullptr;
  return s->slots[fd].load(std::memory_order_acquire);
}

void consider(int fd, int flags) {
  if (!in_range(fd) || (flags & O_ACCMODE) == O_RDONLY || (flags & (O_DIRECT | O_PATH))) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.final || !s.config.enabled) return;
  struct stat64 st {};
  if (real().fstat64(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
  const std::string path = path_of(fd);
  if (path.empty() || path[0] != '/' || !s.config.wants(path)) return;
  (void)adopt(s, fd, path, flags);
}

int stage_fd(int fd) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const int flags = real().fcntl(fd, F_GETFL);
  if (flags < 0) return -1;
  if (!in_range(fd) || (flags & O_ACCMODE) == O_RDONLY || (flags & O_DIRECT)) {
    errno = EINVAL;
    return -1;
  }
  if (s.slots[fd].load()) return 0;
  struct stat64 st {};
  if (real().fstat64(fd, &st) != 0) return -1;
  if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return -1;
  }
  return adopt(s, fd, path_of(fd), flags);
}

void alias(int fd, int new_fd) {
  StagedFile* file = staged(fd);
  if (!file || new_fd == fd) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!in_range(new_fd)) {
    // Out of our table: the new descriptor would bypass staging, so stop staging this file.
    std::lock_guard file_lock(file->mutex);
    (void)file->flush();
    for (auto& slot : s.slots)
      if (slot.load() == file) slot.store(nullptr);
    release(s, file);
    return;
  }
  file->app_fds += 1;
  s.slots[new_fd].store(file, std::memory_order_release);
}

int forget(int fd) {
  StagedFile* file = staged(fd);
  if (!file) return 0;
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.slots[fd].store(nullptr, std::memory_order_release);
  if (--file->app_fds > 0) return 0;
  int result;
  {
    std::lock_guard file_lock(file->mutex);
    result = file->flush();
  }
  release(s, file);
  return result;
}

int unstage(int fd) {
  StagedFile* file = staged(fd);
  if (!file) return 0;
  State& s = state();
  std::lock_guard lock(s.mutex);
  int result;
  {
    std::lock_guard file_lock(file->mutex);
    result = file->flush();
  }
  if (result != 0) return result;  // keep staging what could not be written
  for (auto& slot : s.slots)
    if (slot.load() == file) slot.store(nullptr);
  release(s, file);
  return 0;
}

int flush_all() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  int result = 0;
  int first_errno = 0;
  for (auto& file : s.files) {
    std::lock_guard file_lock(file->mutex);
    if (file->flush() != 0 && result == 0) {
      result = -1;
      first_errno = errno;
    }
  }
  if (result) errno = first_errno;
  return result;
}

int unstage_all(bool final) {
  if (final) end_detected_phase();  // before taking the lock: it reads nothing of the registry
  State& s = state();
  std::lock_guard lock(s.mutex);
  int result = 0;
  int first_errno = 0;
  if (final) s.final = true;
  for (size_t i = 0; i < s.files.size();) {
    StagedFile* file = s.files[i].get();
    int flushed;
    {
      std::lock_guard file_lock(file->mutex);
      flushed = file->flush();
    }
    if (flushed != 0) {
      if (result == 0) first_errno = errno;
      result = -1;
      // Could not write it: keep staging it, but make further writes go straight through.
      std::lock_guard file_lock(file->mutex);
      file->write_through();
      ++i;
      continue;
    }
    for (auto& slot : s.slots)
      if (slot.load() == file) slot.store(nullptr);
    release(s, file);
  }
  if (result) errno = first_errno;
  return result;
}

void set_config(const Config& config) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.config = config;
  s.final = false;
}

Config current_config() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.config;
}

}  // namespace harmonia::bbio
