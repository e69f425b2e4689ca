#include "runtime/bbio/open_files.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "storage/real.hpp"

namespace harmonia::bbio::open_files {

namespace {

using storage::real;

/// Numbers whose file is remembered between looks; those above are looked at only when a call
/// the library sees has used one.
constexpr unsigned kRemembered = 1U << 16;
constexpr unsigned kWords = kRemembered / 64;
/// The most numbers asked of poll(2) at once.
constexpr unsigned kMostPolled = 1024;

struct Remembered {
  /// Numbers a call the library sees opened, closed or replaced since the last look, a bit each.
  std::atomic<std::uint64_t> touched[kWords];
  /// The words of `touched` with a bit set, a bit each: a look visits only those.
  std::atomic<std::uint64_t> touched_words[kWords / 64];
  /// A number of kRemembered or above was used by a seen call, or open at the last look: the
  /// next look covers the whole table.
  std::atomic<bool> beyond{false};
  // Read and written under look_mutex() only:
  std::uint64_t open[kWords];  ///< numbers found open at a look and not found closed since
  dev_t device[kRemembered];   ///< the file behind each open one
  ino_t inode[kRemembered];
};

/// Allocated at the first look (a process that never opens an existing file for staging pays
/// nothing); never freed, as calls arrive during and after static destruction.
std::atomic<Remembered*> remembered{nullptr};

/// Serialises the looks. Held across fork, so that a child never starts with it locked by a
/// thread it lacks.
std::mutex& look_mutex() {
  static auto* const mutex = [] {
    auto* made = new std::mutex;
    pthread_atfork([] { look_mutex().lock(); }, [] { look_mutex().unlock(); },
                   [] { look_mutex().unlock(); });
    return made;
  }();
  return *mutex;
}

/// One more than the highest descriptor number the process can hold now: the size of its
/// descriptor table (/proc/self/status, FDSize), else its descriptor limit.
unsigned table_size() {
  const int status = real().open("/proc/self/status", O_RDONLY | O_CLOEXEC, 0);
  if (status >= 0) {
    char text[4096];
    const ssize_t got = real().read(status, text, sizeof(text) - 1);
    real().close(status);
    if (got > 0) {
      text[got] = '\0';
      if (const char* line = std::strstr(text, "\nFDSize:")) {
        const unsigned long size = std::strtoul(line + 8, nullptr, 10);
        if (size > 0 && size <= (1UL << 30)) return static_cast<unsigned>(size);
      }
    }
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1U << 20;
  return static_cast<unsigned>(std::min<rlim_t>(limit.rlim_cur, 1U << 30));
}

/// poll(2) refuses more entries than the descriptor limit.
unsigned most_polled() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < kMostPolled)
    return std::max<unsigned>(1, static_cast<unsigned>(limit.rlim_cur));
  return kMostPolled;
}

class Look {
 public:
  Look(Remembered& seen, int asking, dev_t device, ino_t inode)
      : seen_(seen), asking_(asking), device_(device), inode_(inode), batch_(most_polled()) {}

  bool found() const { return found_; }

  /// Looks at every number in [first, last); false if poll(2) failed.
  bool numbers(unsigned first, unsigned last) {
    while (first < last) {
      unsigned open = 0;
      if (!batch(first, std::min(batch_, last - first), open)) return false;
      first += std::min(batch_, last - first);
    }
    return true;
  }

  /// Looks from 0 up at the numbers not remembered open, 64 at a time, until 64 in a row are
  /// all closed. A descriptor opened behind the library's back takes the lowest free number, so
  /// it is among them unless many numbers below it were closed since.
  bool bottom() {
    for (unsigned word = 0; word < kWords; ++word) {
      const std::uint64_t closed = ~seen_.open[word];
      if (closed == 0) continue;  // all remembered open: nothing new can be there
      unsigned open = 0;
      if (!some(word, closed, open)) return false;
      if (closed == ~std::uint64_t{0} && open == 0) return true;
    }
    return true;
  }

  /// Looks again at the numbers seen calls used since the last look (above the bottom run too).
  void touched() {
    for (unsigned group = 0; group < kWords / 64; ++group)
      for (std::uint64_t words = seen_.touched_words[group].exchange(0, std::memory_order_acq_rel);
           words; words &= words - 1) {
        const unsigned word = group * 64 + static_cast<unsigned>(std::countr_zero(words));
        for (std::uint64_t bits = seen_.touched[word].exchange(0, std::memory_order_acq_rel); bits;
             bits &= bits - 1)
          refresh(word * 64 + static_cast<unsigned>(std::countr_zero(bits)));
      }
  }

  /// Compares the file with those remembered open (each match checked again, as a number closed
  /// behind the library's back stays remembered open above the bottom run).
  void remembered_open() {
    for (unsigned word = 0; word < kWords && !found_; ++word)
      for (std::uint64_t bits = seen_.open[word]; bits && !found_; bits &= bits - 1) {
        const unsigned number = word * 64 + static_cast<unsigned>(std::countr_zero(bits));
        if (static_cast<int>(number) != asking_ && matches(number)) {
          refresh(number);
          found_ = is_open(number) && matches(number);
        }
      }
  }

 private:
  /// poll(2) of the numbers of word `word` whose bit is set in `bits`; those open are looked at
  /// and counted in `open`.
  bool some(unsigned word, std::uint64_t bits, unsigned& open) {
    pollfd polled[64];
    while (bits) {
      unsigned count = 0;
      for (; bits && count < std::min(64U, batch_); bits &= bits - 1)
        polled[count++] = {static_cast<int>(word * 64 + std::countr_zero(bits)), 0, 0};
      if (poll(polled, count, 0) < 0) return false;
      for (unsigned i = 0; i < count; ++i)
        if (!(polled[i].revents & POLLNVAL)) {
          ++open;
          refresh(static_cast<unsigned>(polled[i].fd));
        }
    }
    return true;
  }

  /// poll(2) of [first, first + count): open numbers are remembered, or looked at; `open` counts
  /// them.
  bool batch(unsigned first, unsigned count, unsigned& open) {
    pollfd polled[kMostPolled];
    for (unsigned i = 0; i < count; ++i) polled[i] = {static_cast<int>(first + i), 0, 0};
    if (poll(polled, count, 0) < 0) return false;
    for (unsigned i = 0; i < count; ++i) {
      const unsigned number = first + i;
      if (polled[i].revents & POLLNVAL) {
        if (number < kRemembered) forget(number);
        continue;
      }
      ++open;
      if (number >= kRemembered) {
        seen_.beyond.store(true, std::memory_order_release);  // looked at again next time
        struct stat64 st {};
        found_ = found_ || (static_cast<int>(number) != asking_ &&
                            real().fstat64(static_cast<int>(number), &st) == 0 &&
                            st.st_dev == device_ && st.st_ino == inode_);
      } else if (!is_open(number)) {
        refresh(number);
      }
    }
    return true;
  }

  void refresh(unsigned number) {
    struct stat64 st {};
    if (real().fstat64(static_cast<int>(number), &st) != 0) {
      forget(number);
      return;
    }
    seen_.device[number] = st.st_dev;
    seen_.inode[number] = st.st_ino;
    seen_.open[number / 64] |= std::uint64_t{1} << (number % 64);
  }
  void forget(unsigned number) { seen_.open[number / 64] &= ~(std::uint64_t{1} << (number % 64)); }
  bool is_open(unsigned number) const { return seen_.open[number / 64] >> (number % 64) & 1; }
  bool matches(unsigned number) const {
    return seen_.device[number] == device_ && seen_.inode[number] == inode_;
  }

  Remembered& seen_;
  const int asking_;
  const dev_t device_;
  const ino_t inode_;
  const unsigned batch_;
  bool found_ = false;
};

/// Marks `bits` of word `word` touched: the word first, then its bit among the words, so that a
/// look that sees the word's bit finds the number's.
void touch(Remembered& seen, unsigned word, std::uint64_t bits) {
  seen.touched[word].fetch_or(bits, std::memory_order_acq_rel);
  seen.touched_words[word / 64].fetch_or(std::uint64_t{1} << (word % 64),
                                         std::memory_order_acq_rel);
}

}  // namespace

void changed(int fd) noexcept {
  Remembered* seen = remembered.load(std::memory_order_acquire);
  if (!seen || fd < 0) return;
  const auto number = static_cast<unsigned>(fd);
  if (number >= kRemembered)
    seen->beyond.store(true, std::memory_order_release);
  else
    touch(*seen, number / 64, std::uint64_t{1} << (number % 64));
}

void changed_range(unsigned first, unsigned last) noexcept {
  Remembered* seen = remembered.load(std::memory_order_acquire);
  if (!seen || first > last) return;
  if (last >= kRemembered) seen->beyond.store(true, std::memory_order_release);
  const unsigned end = std::min(last, kRemembered - 1);
  for (unsigned word = first / 64; word <= end / 64 && first <= end; ++word) {
    // The bits of [first, end] in this word.
    const unsigned low = std::max(first, word * 64) % 64, high = std::min(end, word * 64 + 63) % 64;
    const std::uint64_t bits = (~std::uint64_t{0} >> (63 - high)) & (~std::uint64_t{0} << low);
    touch(*seen, word, bits);
  }
}

bool others_refer_to(int fd, dev_t device, ino_t inode) {
  const int saved = errno;
  const std::lock_guard lock(look_mutex());
  Remembered* seen = remembered.load(std::memory_order_acquire);
  const bool first_look = !seen;
  if (first_look) {
    // `touched` and `open` start cleared; the files are written as numbers are found open.
    seen = new (std::nothrow) Remembered;
    if (!seen) {
      errno = saved;
      return true;  // cannot tell: the careful answer
    }
    std::memset(static_cast<void*>(seen->open), 0, sizeof(seen->open));
    remembered.store(seen, std::memory_order_release);
  }
  Look look(*seen, fd, device, inode);
  // The first look, and any after a seen call used a number beyond those remembered, covers
  // the whole table; the others look again at what seen calls changed, and at the bottom run.
  look.touched();
  const bool listed = first_look || seen->beyond.exchange(false, std::memory_order_acq_rel)
                          ? look.numbers(0, table_size())
                          : look.bottom();
  if (!listed) {
    errno = saved;
    return true;  // cannot tell: the careful answer
  }
  if (!look.found()) look.remembered_open();
  errno = saved;
  return look.found();
}

}  // namespace harmonia::bbio::open_files
