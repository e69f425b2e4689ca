#include "runtime/bbio/agent.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/frames.hpp"
#include "common/identity.hpp"
#include "common/unix_socket.hpp"
#include "control/control.pb-c.h"
#include "control/frame.hpp"
#include "runtime/bbio/config.hpp"
#include "runtime/bbio/descriptors.hpp"
#include "runtime/bbio/report.hpp"
#include "storage/real.hpp"

namespace harmonia::bbio::agent {

using storage::real;

namespace {

namespace wire = harmonia::control;

/// The directive staged files follow: replaced whole by publish(), read by copy. Without a
/// daemon: stage, flush freely, no buffer nodes.
std::mutex published_mutex;
Directive& published_directive() {
  static auto* directive = new Directive{0, true, true, {}};  // used until exit
  return *directive;
}
std::atomic<std::uint64_t> published_version{0};

/// Whether the published directive lets staged data be flushed now.
bool flush_allowed_now() {
  std::lock_guard lock(published_mutex);
  return published_directive().flush_allowed;
}

/// How long a process waits for the reply that starts a phase or registers it.
constexpr double kReplyWait = 1.0;
/// How long an open waits for the other processes to write out a file (the daemon's own wait
/// is 2 s; this one covers the way back).
constexpr double kSettleWait = 2.5;
/// How long a drain the scheduler orders may take before the process gives up on a daemon that
/// stopped answering (a drain moves as many bytes as the file holds on a node: minutes at most).
constexpr double kDrainBound = 3600;
/// Heartbeats and phase-end checks run at least this often.
constexpr double kPoll = 0.25;
/// Reconnection attempts to a daemon that is gone.
constexpr double kRetry = 0.5;
/// An AnnounceRead's files take at most this much of a frame (at most 65536 bytes).
constexpr size_t kMaxAnnounceBytes = 60000;

/// The file layer's entry points (set_file_layer), read without a lock once set.
std::atomic<std::size_t (*)()> staged_bytes_of{nullptr};
std::atomic<void (*)(const std::string&, bool, dev_t, ino_t)> settle_for_reader_of{nullptr};
std::atomic<int (*)()> flush_all_of{nullptr};

std::size_t staged_total() {
  const auto staged = staged_bytes_of.load(std::memory_order_acquire);
  return staged ? staged() : 0;
}

void settle_for_reader(const std::string& path, bool same_host, dev_t device, ino_t inode) {
  if (const auto settle = settle_for_reader_of.load(std::memory_order_acquire))
    settle(path, same_host, device, inode);
}

int flush_all() {
  const auto flush = flush_all_of.load(std::memory_order_acquire);
  return flush ? flush() : 0;
}

double now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// `text` with every byte outside printable ASCII replaced by '?': protobuf strings must be UTF-8,
/// and environment variables need not be.
std::string printable(std::string text) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return text;
}

struct Identity : bbio::Identity {
  std::string host;
};

/// Who this process is: the environment's identity (config.cpp), completed with what only this
/// process knows (its host, its pid after a fork, its program's name).
Identity identity() {
  Identity id{environment().identity, {}};
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  id.host = host;
  // Without a batch system's or MPI's key, the processes of one session (a login shell, a
  // script started with setsid) are one job: a program and the tools it runs (git and its
  // helpers, make and the compiler) must not wait for each other's I/O phases.
  if (id.job.empty())
    id.job = id.mpi_job.empty() ? "sid-" + std::to_string(getsid(0)) + "@" + id.host
                                : "mpi-" + id.mpi_job + "@" + id.host;
  if (id.name.empty()) id.name = program_invocation_short_name;
  id.job = printable(id.job.substr(0, 256));
  id.name = printable(id.name.substr(0, 256));
  id.host = printable(id.host);
  return id;
}

/// `envelope` (with its body set by the caller) as one frame.
std::string frame_of(const Harmonia__Control__Envelope& envelope) {
  return common::packed_frame(envelope, harmonia__control__envelope__get_packed_size,
                              harmonia__control__envelope__pack);
}

class Agent {
 public:
  explicit Agent(std::string address) : address_(std::move(address)), pid_(getpid()) {
    if (const char* node_agent = std::getenv("HARMONIA_AGENT")) node_agent_ = node_agent;
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    host_ = printable(host);
    phase_gap_ = environment().config.phase_gap;
    silence_limit_ = environment().config.schedd_timeout;
    read_grant_ = std::make_shared<const ReadGrant>();
    publish({0, false, true, {}});  // until the daemon's first directive: write through
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
      wake_[0] = wake_[1] = -1;
    } else {
      wake_[0] = above_program(wake_[0]);
      wake_[1] = above_program(wake_[1]);
    }
    thread_ = std::thread([this] { run(); });
    thread_.detach();
    // The first write waits (briefly) for the registration, so that it already follows the
    // daemon's directive.
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, std::chrono::duration<double>(kReplyWait),
                      [this] { return attempted_; });
  }

  pid_t pid() const { return pid_; }

  std::vector<uint32_t> servers() {
    std::lock_guard lock(mutex_);
    return servers_;
  }

  void before_flush(const FileId& file) {
    std::unique_lock lock(mutex_);
    if (!connected_) return;
    if (!wants_flush_) await_reply(lock, ask_to_flush(lock));
    // Stage and block: wait for the turn, for the daemon to go away, or for another process
    // waiting to open this very file (its settle order must not wait for the turn).
    changed_.wait(lock,
                  [&] { return !connected_ || flush_allowed_now() || reader_waits_for(file); });
  }

  void after_flush(size_t still_staged) {
    std::unique_lock lock(mutex_);
    if (still_staged > 0 || !wants_flush_) return;
    wants_flush_ = false;
    if (!connected_) return;
    Harmonia__Control__FlushDone body = HARMONIA__CONTROL__FLUSH_DONE__INIT;
    (void)post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_FLUSH_DONE,
               &Harmonia__Control__Envelope::flush_done, body);
  }

  void before_write() {
    const double gap = min_gap_.load(std::memory_order_relaxed);
    if (gap > 0) {
      // Throttle: the starts of two writes of this process are at least `gap` apart.
      double start = now();
      double expected = next_write_.load();
      double mine;
      do {
        mine = std::max(start, expected);
      } while (!next_write_.compare_exchange_weak(expected, mine + gap));
      if (mine > start) {
        const double wait = mine - start;
        timespec ts{static_cast<time_t>(wait), static_cast<long>((wait - std::floor(wait)) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
      }
    }
    if (!declared_.load(std::memory_order_relaxed)) {
      last_write_.store(now(), std::memory_order_relaxed);
      if (!in_phase_.load(std::memory_order_relaxed)) begin_phase("", 0, true);
    }
    if (await_grant_.load(std::memory_order_relaxed)) {
      // Burst-buffer mode: the phase waits for its nodes (or for the daemon to go away).
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return !connected_ || !await_grant_.load(); });
    }
  }

  void begin_phase(const std::string& name, size_t expected, bool detected) {
    std::unique_lock lock(mutex_);
    if (!detected) declared_ = true;
    if (in_phase_) return;
    in_phase_ = true;
    detected_phase_ = detected;
    if (!connected_) return;
    Harmonia__Control__PhaseBegin body = HARMONIA__CONTROL__PHASE_BEGIN__INIT;
    const std::string safe_name = printable(name.substr(0, 256));
    body.name = const_cast<char*>(safe_name.c_str());
    body.expected_bytes = expected;
    body.detected = detected;
    // Wait for the reply: the phase's first write then follows the directive it brings.
    await_reply(lock, post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_PHASE_BEGIN,
                           &Harmonia__Control__Envelope::phase_begin, body));
  }

  void end_phase() {
    std::unique_lock lock(mutex_);
    end_phase(lock);
  }

  bool begin_read_phase() {
    std::unique_lock lock(mutex_);
    read_idle_ = false;
    if (read_phase_) return true;  // a file opened within the gap: the same read phase
    if (in_phase_) return false;
    in_phase_ = true;
    read_phase_ = true;
    detected_phase_ = false;
    if (connected_) {
      Harmonia__Control__PhaseBegin body = HARMONIA__CONTROL__PHASE_BEGIN__INIT;
      body.read = true;
      await_reply(lock, post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_PHASE_BEGIN,
                             &Harmonia__Control__Envelope::phase_begin, body));
    }
    // The phase waits for its nodes, as a write phase's first write does (the daemon gone, or
    // silent past HARMONIA_SCHEDD_TIMEOUT, ends the wait: fall_back clears await_grant_).
    changed_.wait(lock, [this] { return !connected_ || !await_grant_.load(); });
    return true;
  }

  void read_idle() {
    std::lock_guard lock(mutex_);
    if (!read_phase_) return;
    read_idle_ = true;
    read_idle_since_ = now();
  }

  std::shared_ptr<const ReadGrant> read_grant() {
    std::lock_guard lock(mutex_);
    return read_grant_;
  }

  std::uint64_t read_grant_version() const {
    return read_grant_version_.load(std::memory_order_acquire);
  }

  /// Before this process opens `path`: asks the daemon to have every other process write out
  /// what it stages of the file, and the buffer nodes drain what they hold of it (`buffered`),
  /// and waits until they did (or the daemon's wait passed). -1 (EIO) when a node holding bytes
  /// of it stayed down, or the daemon went away while the nodes drained it.
  int settle_elsewhere(const std::string& path, dev_t device, ino_t inode, bool buffered) {
    std::unique_lock lock(mutex_);
    if (!connected_) return 0;
    const std::optional<SettleStart> started =
        start_settle(lock, path, device, inode, buffered, false);
    if (!started || started->waiting == 0) return 0;
    // Processes answer within the daemon's own wait; nodes drain as long as the file takes,
    // and one that is down is waited for HARMONIA_NODE_WAIT (the daemon decides; this bound
    // only covers a daemon that stops answering).
    const double bound = started->held ? node_wait_ + lease_ + kSettleWait : kSettleWait;
    changed_.wait_for(lock, std::chrono::duration<double>(bound),
                      [&] { return !connected_ || settle_completed_.count(started->id); });
    const auto completed = settle_completed_.find(started->id);
    const bool unavailable =
        started->held && (completed == settle_completed_.end() || completed->second);
    if (completed != settle_completed_.end()) settle_completed_.erase(completed);
    if (!unavailable) return 0;
    report(path + ": " +
           (completed != settle_completed_.end() || connected_
                ? "bytes of it are on a buffer node that stayed down (HARMONIA_NODE_WAIT): EIO"
                : "the scheduler daemon went away while the buffer nodes drained it: EIO"));
    errno = EIO;
    return -1;
  }

  std::optional<bool> drain_through_scheduler(const std::string& name, ino_t inode,
                                              const std::vector<std::string>& nodes, double wait,
                                              const char* reason) {
    // A file with no name beneath the root cannot be named to the daemon: the nodes are asked.
    if (name.empty()) return std::nullopt;
    std::unique_lock lock(mutex_);
    if (!connected_) return std::nullopt;
    Harmonia__Control__SettleFile body = HARMONIA__CONTROL__SETTLE_FILE__INIT;
    const std::string safe_name = printable(name.substr(0, 4096));
    std::vector<std::string> safe_nodes;
    std::vector<char*> node_pointers;
    for (const auto& node : nodes) safe_nodes.push_back(printable(node.substr(0, 256)));
    for (auto& node : safe_nodes) node_pointers.push_back(node.data());
    body.path = const_cast<char*>(safe_name.c_str());
    body.inode = inode;
    body.host = const_cast<char*>(host_.c_str());
    body.buffered = true;
    body.own = true;
    body.node_wait = wait;
    body.n_nodes = node_pointers.size();
    body.nodes = node_pointers.data();
    body.reason = const_cast<char*>(reason);
    const uint64_t seq = post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_SETTLE_FILE,
                              &Harmonia__Control__Envelope::settle_file, body);
    changed_.wait_for(lock, std::chrono::duration<double>(kReplyWait),
                      [&] { return !connected_ || settle_started_.count(seq); });
    const auto started = settle_started_.find(seq);
    if (started == settle_started_.end()) return std::nullopt;  // no answer: ask the nodes
    const SettleStart settle = started->second;
    settle_started_.erase(started);
    if (settle.waiting == 0) return true;
    // The nodes drain as long as the file takes; one that is down is waited for `wait` by the
    // daemon. This bound only covers a daemon that stops answering (it is then gone).
    changed_.wait_for(lock, std::chrono::duration<double>(kDrainBound),
                      [&] { return !connected_ || settle_completed_.count(settle.id); });
    const auto completed = settle_completed_.find(settle.id);
    // The daemon went away (or stopped answering) while the nodes drained: that says nothing
    // of the nodes, which are asked themselves, as with no daemon.
    if (completed == settle_completed_.end()) return std::nullopt;
    const bool unavailable = completed->second;
    settle_completed_.erase(completed);
    return !unavailable;
  }

  /// A stat of the file with `inode` beneath HARMONIA_BUFFER_ROOT: what the buffer nodes hold
  /// of it, when they hold any.
  std::optional<HeldByNodes> held_by_nodes(ino_t inode) {
    std::unique_lock lock(mutex_);
    if (!connected_) return std::nullopt;
    const std::optional<SettleStart> started = start_settle(lock, "", 0, inode, true, true);
    if (!started || !started->held) return std::nullopt;
    return HeldByNodes{started->size, started->mtime_ns, started->handle};
  }

  void shutdown() {
    std::unique_lock lock(mutex_);
    end_phase(lock);
    if (!connected_) return;
    unregistered_ = true;  // a settle order carried out from now on is not answered: it left
    Harmonia__Control__Unregister body = HARMONIA__CONTROL__UNREGISTER__INIT;
    await_reply(lock, post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_UNREGISTER,
                           &Harmonia__Control__Envelope::unregister, body));
    stopping_ = true;
  }

 private:
  void end_phase(std::unique_lock<std::mutex>& lock) {
    if (!in_phase_) return;
    in_phase_ = false;
    detected_phase_ = false;
    // The read phase is over: a daemon met again later is not told of the files any more.
    if (read_phase_) read_done_ = true;
    read_phase_ = false;
    if (!connected_) return;
    // Out of its phase with data still staged: it has nothing left but to flush, so it asks, and
    // keeps its place in line until the flush is done (docs/coordination.md). It asks before it
    // says the phase ended: the other way round, a daemon deciding between the two would see a
    // job neither writing nor waiting to flush, and tell it to write through, out of its turn.
    if (!wants_flush_ && staged_total() > 0) (void)ask_to_flush(lock);
    Harmonia__Control__PhaseEnd body = HARMONIA__CONTROL__PHASE_END__INIT;
    (void)post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_PHASE_END,
               &Harmonia__Control__Envelope::phase_end, body);
  }

  /// Tells the daemon this process would flush now (it is then in line until FlushDone).
  uint64_t ask_to_flush(std::unique_lock<std::mutex>& lock) {
    wants_flush_ = true;
    Harmonia__Control__FlushRequest body = HARMONIA__CONTROL__FLUSH_REQUEST__INIT;
    body.staged_bytes = staged_total();
    return post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_FLUSH_REQUEST,
                &Harmonia__Control__Envelope::flush_request, body);
  }

  /// Queues a request carrying `body` (the Envelope's `member`); returns its seq.
  template <class Body>
  uint64_t post(std::unique_lock<std::mutex>& lock, Harmonia__Control__Envelope__BodyCase which,
                Body* Harmonia__Control__Envelope::*member, Body& body) {
    Harmonia__Control__Envelope e = HARMONIA__CONTROL__ENVELOPE__INIT;
    e.body_case = which;
    e.*member = &body;
    return enqueue(lock, e);
  }

  uint64_t enqueue(std::unique_lock<std::mutex>&, Harmonia__Control__Envelope& e) {
    e.seq = next_seq_++;
    outbox_.push_back(frame_of(e));
    if (wake_[1] >= 0) (void)real().write(wake_[1], "x", 1);
    return e.seq;
  }

  void await_reply(std::unique_lock<std::mutex>& lock, uint64_t seq) {
    changed_.wait_for(lock, std::chrono::duration<double>(kReplyWait),
                      [&] { return !connected_ || replied_ >= seq; });
  }

  /// Without a daemon: write through, flush freely, no pacing.
  void fall_back() {
    servers_.clear();
    set_read_grant(ReadGrant{});
    await_grant_ = false;
    min_gap_ = 0;
    publish({0, false, true, {}});
  }

  void apply(const Harmonia__Control__Directive* d) {
    if (!d) return;
    servers_.assign(d->servers, d->servers + d->n_servers);
    const bool stage = d->mode == HARMONIA__CONTROL__MODE__MODE_STAGE;
    const bool flush_allowed = d->flush_allowed;
    min_gap_ = d->min_request_gap > 0 && d->min_request_gap < 10 ? d->min_request_gap : 0;
    Grant grant;
    if (d->buffer_mode) {
      for (size_t i = 0; i < d->n_buffers; ++i) grant.nodes.emplace_back(d->buffers[i]);
      grant.stripe = d->stripe_bytes;
      grant.job = d->job ? d->job : "";
    }
    await_grant_ = d->buffer_mode && d->await_grant;
    ReadGrant reads;
    if (d->buffer_mode && d->n_buffers > 0 && d->stripe_bytes > 0) {
      reads.nodes = grant.nodes;
      reads.stripe = d->stripe_bytes;
      reads.files.assign(d->read_files, d->read_files + d->n_read_files);
      std::sort(reads.files.begin(), reads.files.end());
    }
    set_read_grant(std::move(reads));
    // The read phase's nodes hold its copies: the process's writes meanwhile are no phase the
    // policy placed there, and go where writes outside a phase go.
    if (read_phase_) grant.nodes.clear();
    publish({0, stage, flush_allowed, std::move(grant)});
    // Flush now: staged data may go, and nothing else will move it soon (the process writes
    // through now, or asked to flush). The flusher thread writes it out behind the application.
    if (flush_allowed && staged_total() > 0 && (!stage || wants_flush_)) {
      if (!flusher_started_) {
        flusher_started_ = true;
        std::thread([this] { flush_behind(); }).detach();
      }
      flush_wanted_ = true;
      flush_signal_.notify_one();
    }
  }

  /// Takes `next` as the read grant; a new version only when it differs (mutex held).
  void set_read_grant(ReadGrant next) {
    const ReadGrant& now = *read_grant_;
    if (next.nodes == now.nodes && next.stripe == now.stripe && next.files == now.files) return;
    next.version = now.version + 1;
    read_grant_ = std::make_shared<const ReadGrant>(std::move(next));
    read_grant_version_.store(read_grant_->version, std::memory_order_release);
  }

  /// The files of HARMONIA_PREFETCH as they are now: the regular ones, with their sizes, as many
  /// as one frame holds.
  static std::vector<std::pair<std::string, std::uint64_t>> prefetch_sizes() {
    std::vector<std::pair<std::string, std::uint64_t>> files;
    size_t bytes = 0;
    for (const PrefetchFile& file : environment().prefetch) {
      struct stat64 st {};
      if (real().fstatat64(AT_FDCWD, file.path.c_str(), &st, 0) != 0 || !S_ISREG(st.st_mode)) {
        report("HARMONIA_PREFETCH: " + file.path + " is missing or not a regular file now; " +
               "not announced");
        continue;
      }
      bytes += file.name.size() + 24;  // the name, its size and the framing, generously
      if (bytes > kMaxAnnounceBytes) {
        report(
            "HARMONIA_PREFETCH: the list is too long for one announcement; announced the "
            "first " +
            std::to_string(files.size()) + " files");
        break;
      }
      files.emplace_back(file.name, static_cast<std::uint64_t>(st.st_size));
    }
    return files;
  }

  /// After a registration: tells the daemon which files the job will read (until this process's
  /// read phase ended), and restates the read phase it is in (mutex held).
  void announce(std::unique_lock<std::mutex>& lock,
                const std::vector<std::pair<std::string, std::uint64_t>>& sizes) {
    if (read_done_ || sizes.empty()) return;
    std::vector<Harmonia__Control__ReadFile> files(sizes.size());
    std::vector<Harmonia__Control__ReadFile*> pointers;
    for (size_t i = 0; i < sizes.size(); ++i) {
      files[i] = HARMONIA__CONTROL__READ_FILE__INIT;
      files[i].file = const_cast<char*>(sizes[i].first.c_str());
      files[i].size = sizes[i].second;
      pointers.push_back(&files[i]);
    }
    Harmonia__Control__AnnounceRead body = HARMONIA__CONTROL__ANNOUNCE_READ__INIT;
    body.n_files = pointers.size();
    body.files = pointers.data();
    (void)post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_ANNOUNCE_READ,
               &Harmonia__Control__Envelope::announce_read, body);
    if (!read_phase_) return;
    Harmonia__Control__PhaseBegin begin = HARMONIA__CONTROL__PHASE_BEGIN__INIT;
    begin.read = true;
    (void)post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_PHASE_BEGIN,
               &Harmonia__Control__Envelope::phase_begin, begin);
  }

  /// Whether a settle order not carried out yet names `file` (mutex held).
  bool reader_waits_for(const FileId& file) const {
    for (const SettleOrder& order : settle_orders_)
      if (order.same_host ? order.device == file.device && order.inode == file.inode
                          : order.path == file.path)
        return true;
    return false;
  }

  /// Carries out the daemon's settle orders, one after the other, off the connection's thread
  /// (a flush may wait for the daemon's permission, which that thread must be free to receive).
  void settle_for_others() {
    std::unique_lock lock(mutex_);
    for (;;) {
      settle_signal_.wait(lock, [this] { return !settle_orders_.empty(); });
      const SettleOrder order = settle_orders_.front();  // stays queued while carried out
      lock.unlock();
      settle_for_reader(order.path, order.same_host, order.device, order.inode);
      lock.lock();
      settle_orders_.pop_front();
      if (!connected_ || unregistered_) continue;
      Harmonia__Control__SettleDone body = HARMONIA__CONTROL__SETTLE_DONE__INIT;
      body.id = order.id;
      (void)post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_SETTLE_DONE,
                 &Harmonia__Control__Envelope::settle_done, body);
    }
  }

  void flush_behind() {
    std::unique_lock lock(mutex_);
    for (;;) {
      flush_signal_.wait(lock, [this] { return flush_wanted_; });
      flush_wanted_ = false;
      lock.unlock();
      (void)flush_all();  // failures stay staged, and are reported when the file is closed
      lock.lock();
    }
  }

  /// What the daemon answered to a SettleFile.
  struct SettleStart {
    uint64_t id = 0;
    uint32_t waiting = 0;
    bool held = false;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    std::string handle;
  };

  /// Sends SettleFile and waits for its SettleStarted; nothing when the daemon did not answer.
  std::optional<SettleStart> start_settle(std::unique_lock<std::mutex>& lock,
                                          const std::string& path, dev_t device, ino_t inode,
                                          bool buffered, bool stat_only) {
    Harmonia__Control__SettleFile body = HARMONIA__CONTROL__SETTLE_FILE__INIT;
    const std::string safe_path = printable(path.substr(0, 4096));
    body.path = const_cast<char*>(safe_path.c_str());
    body.device = device;
    body.inode = inode;
    body.host = const_cast<char*>(host_.c_str());
    body.buffered = buffered;
    body.stat_only = stat_only;
    body.node_wait = node_wait_;
    const uint64_t seq = post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_SETTLE_FILE,
                              &Harmonia__Control__Envelope::settle_file, body);
    changed_.wait_for(lock, std::chrono::duration<double>(kReplyWait),
                      [&] { return !connected_ || settle_started_.count(seq); });
    const auto started = settle_started_.find(seq);
    if (started == settle_started_.end()) return std::nullopt;
    const SettleStart out = started->second;
    settle_started_.erase(started);
    return out;
  }

  /// Handles one frame from the daemon (mutex held).
  void receive(const uint8_t* data, size_t length) {
    Harmonia__Control__Envelope* e = harmonia__control__envelope__unpack(nullptr, length, data);
    if (!e) {
      report("HARMONIA_SCHEDD=" + address_ + ": the daemon sent a malformed frame");
      return;
    }
    switch (e->body_case) {
      case HARMONIA__CONTROL__ENVELOPE__BODY_DIRECTIVE:
        apply(e->directive);
        break;
      case HARMONIA__CONTROL__ENVELOPE__BODY_REGISTERED:
        apply(e->registered->directive);
        if (e->registered->lease_seconds > 0) lease_ = e->registered->lease_seconds;
        break;
      case HARMONIA__CONTROL__ENVELOPE__BODY_SETTLE_STARTED: {
        const auto* started = e->settle_started;
        settle_started_[e->seq] = {
            started->id,
            started->waiting,
            started->held != 0,
            started->held_size,
            started->held_mtime_ns,
            std::string(reinterpret_cast<const char*>(started->held_handle.data),
                        started->held_handle.len)};
        apply(started->directive);
        break;
      }
      case HARMONIA__CONTROL__ENVELOPE__BODY_SETTLE_COMPLETE:
        settle_completed_[e->settle_complete->id] = e->settle_complete->unavailable != 0;
        break;
      case HARMONIA__CONTROL__ENVELOPE__BODY_SETTLE_ORDER:
        if (const auto* file = e->settle_order->file) {
          settle_orders_.push_back(
              {e->settle_order->id, file->path ? file->path : "", file->host && host_ == file->host,
               static_cast<dev_t>(file->device), static_cast<ino_t>(file->inode)});
          if (!settler_started_) {
            settler_started_ = true;
            std::thread([this] { settle_for_others(); }).detach();
          }
          settle_signal_.notify_one();
          changed_.notify_all();  // a flush of that file waiting for its turn goes now
        }
        break;
      case HARMONIA__CONTROL__ENVELOPE__BODY_ERROR:
        report("HARMONIA_SCHEDD=" + address_ + ": " +
               (e->error->message ? e->error->message : "error"));
        break;
      default:
        break;
    }
    if (e->seq > replied_) replied_ = e->seq;
    harmonia__control__envelope__free_unpacked(e, nullptr);
  }

  /// Handles every whole frame at the front of `input` and drops it from there (mutex held).
  /// False when a frame is larger than any reply may be: the connection is no good.
  bool receive_frames(std::vector<uint8_t>& input) {
    for (;;) {
      const auto scan = wire::scan_frame(input.data(), input.size(), wire::kMaxReplyBytes);
      if (scan.kind == wire::FrameScan::Kind::TooLarge) return false;
      if (scan.kind != wire::FrameScan::Kind::Frame) return true;
      receive(input.data() + wire::kHeaderBytes, scan.body_length);
      input.erase(input.begin(),
                  input.begin() + static_cast<long>(wire::kHeaderBytes + scan.body_length));
    }
  }

  /// Registers through the node agent when there is one (HARMONIA_AGENT), else, or when it is
  /// gone or refuses this process, with the daemon directly. Returns the socket or -1; `after`
  /// holds what the daemon sent after the registration's reply, read with it.
  int attach(std::vector<uint8_t>& after) {
    if (!node_agent_.empty() && !node_agent_refused_) {
      const int fd = attach(node_agent_, "HARMONIA_AGENT", node_agent_refused_, after);
      via_node_agent_ = fd >= 0;
      if (fd >= 0) return fd;
    }
    via_node_agent_ = false;
    return refused_ ? -1 : attach(address_, "HARMONIA_SCHEDD", refused_, after);
  }

  /// Connects to `address` (the daemon or a node agent, which speaks the same protocol) and
  /// registers, restating this process's phase and flush state. Returns the connected socket
  /// or -1; `refused` is set when the registration was refused (no retry would change that).
  /// What the daemon sent after the registration's reply and was read with it (a settle order
  /// or a directive pushed at once) is left in `after`, for the connection's loop.
  int attach(const std::string& address, const char* variable, bool& refused,
             std::vector<uint8_t>& after) {
    // Closed through the real close(): libharmonia's own would look the descriptor up first.
    const int fd =
        above_program(common::connect_address(address, [](int failed) { real().close(failed); }));
    if (fd < 0) return -1;
    const Identity id = identity();
    Harmonia__Control__RegisterProcess body = HARMONIA__CONTROL__REGISTER_PROCESS__INIT;
    body.protocol_version = HARMONIA__CONTROL__VERSION__VERSION_CURRENT;
    body.job = const_cast<char*>(id.job.c_str());
    body.name = const_cast<char*>(id.name.c_str());
    body.rank = id.rank;
    body.ranks = id.ranks;
    body.priority = id.priority;
    body.bytes_per_process = id.bytes_per_process;
    body.cached = id.cached;
    body.io_qos = const_cast<char*>(id.io_qos.c_str());
    body.pid = static_cast<uint32_t>(getpid());
    body.host = const_cast<char*>(id.host.c_str());
    Harmonia__Control__Envelope e = HARMONIA__CONTROL__ENVELOPE__INIT;
    e.body_case = HARMONIA__CONTROL__ENVELOPE__BODY_REGISTER_PROCESS;
    e.register_process = &body;
    // Over TCP the daemon knows the user only from a MUNGE credential, sent first (pipelined
    // with the registration). Without munged none is sent: a daemon that requires one refuses
    // the registration, said below.
    std::string frames;
    std::string credential_problem;
    if (address.rfind("tcp:", 0) == 0) {
      const auto credential = common::make_credential(
          "harmonia-schedd", common::munge_socket_from_environment(), credential_problem);
      if (credential) {
        Harmonia__Control__Authenticate auth = HARMONIA__CONTROL__AUTHENTICATE__INIT;
        auth.credential.data = reinterpret_cast<uint8_t*>(const_cast<char*>(credential->data()));
        auth.credential.len = credential->size();
        Harmonia__Control__Envelope a = HARMONIA__CONTROL__ENVELOPE__INIT;
        a.body_case = HARMONIA__CONTROL__ENVELOPE__BODY_AUTHENTICATE;
        a.authenticate = &auth;
        std::lock_guard lock(mutex_);
        a.seq = next_seq_++;
        frames = frame_of(a);
      }
    }
    {
      std::lock_guard lock(mutex_);
      // A read phase is restated after the announcement that gives it its files (announce).
      body.in_phase = in_phase_ && !read_phase_;
      body.wants_flush = wants_flush_;
      e.seq = next_seq_++;
    }
    frames += frame_of(e);
    if (!common::send_all(fd, frames)) {
      close_kept(fd);
      return -1;
    }
    // The replies: Authenticated (or an Error: the registration then says whether an identity
    // was needed), then Registered, or an Error (wrong version, another user's job, no
    // identity) that no retry fixes.
    std::vector<uint8_t> input;
    const double deadline = now() + silence_limit_;
    while (now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>((deadline - now()) * 1000) + 1) <= 0) continue;
      uint8_t chunk[4096];
      const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) break;
      input.insert(input.end(), chunk, chunk + n);
      bool done = false, registered = false;
      for (;;) {
        const auto scan = wire::scan_frame(input.data(), input.size(), wire::kMaxReplyBytes);
        if (scan.kind != wire::FrameScan::Kind::Frame) {
          done = scan.kind == wire::FrameScan::Kind::TooLarge;
          break;
        }
        Harmonia__Control__Envelope* reply = harmonia__control__envelope__unpack(
            nullptr, scan.body_length, input.data() + wire::kHeaderBytes);
        const bool is_error = reply && reply->body_case == HARMONIA__CONTROL__ENVELOPE__BODY_ERROR;
        if (reply && reply->seq == e.seq) {
          registered = reply->body_case == HARMONIA__CONTROL__ENVELOPE__BODY_REGISTERED;
          if (!registered) {
            const bool via_node_agent = &refused == &node_agent_refused_;
            report(
                std::string(variable) + "=" + address + ": registration refused: " +
                (is_error ? std::string(reply->error->message) : std::string("unexpected reply")) +
                (credential_problem.empty() ? "" : " (" + credential_problem + ")") +
                (via_node_agent ? "; speaking to the scheduler daemon directly"
                                : "; writing through without coordination"));
            refused = true;
          } else {
            std::lock_guard lock(mutex_);
            receive(input.data() + wire::kHeaderBytes, scan.body_length);
          }
          done = true;
        } else if (is_error) {
          credential_problem = reply->error->message;  // the Authenticate's, said if it matters
        }
        if (reply) harmonia__control__envelope__free_unpacked(reply, nullptr);
        input.erase(input.begin(),
                    input.begin() + static_cast<long>(wire::kHeaderBytes + scan.body_length));
        if (done || !reply) {
          done = true;
          break;
        }
      }
      if (registered) {
        after = std::move(input);
        return fd;
      }
      if (done) break;
    }
    close_kept(fd);
    return -1;
  }

  void run() {
    std::vector<uint8_t> input;
    int fd = -1;
    double last_sent = 0, last_heard = 0;
    for (;;) {
      if (fd < 0) {
        std::vector<uint8_t> after;
        fd = attach(after);
        const auto sizes = fd >= 0 ? prefetch_sizes() : decltype(prefetch_sizes()){};
        std::unique_lock lock(mutex_);
        attempted_ = true;
        if (fd >= 0) {
          connected_ = true;
          outbox_.clear();  // events of the old connection: restated by the registration
          replied_ = next_seq_ - 1;
          last_sent = last_heard = now();
          // Pushed right after the registration's reply, read with it: a settle order left
          // unanswered here would hold another process's open for the daemon's whole wait.
          input = std::move(after);
          if (!receive_frames(input)) {
            close_kept(fd);
            fd = -1;
            connected_ = false;
          }
        }
        if (fd >= 0) {
          announce(lock, sizes);
        } else {
          report_once_unreachable();
        }
        changed_.notify_all();
        if (fd < 0) {
          changed_.wait_for(lock, std::chrono::duration<double>(kRetry),
                            [this] { return stopping_; });
          if (stopping_) return;
          continue;
        }
      }
      pollfd polled[2] = {{fd, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      (void)poll(polled, wake_[0] >= 0 ? 2 : 1, static_cast<int>(kPoll * 1000));
      bool lost = false;
      std::deque<std::string> sending;
      {
        std::unique_lock lock(mutex_);
        if (polled[1].revents & POLLIN) {
          char drain[64];
          while (real().read(wake_[0], drain, sizeof(drain)) > 0) {
          }
        }
        const double t = now();
        // A detected phase ends after an idle gap; so does the read phase, once no descriptor
        // of an announced file was open for that long (a restart reads its files one by one).
        if (detected_phase_ && t - last_write_.load() > phase_gap_) end_phase(lock);
        if (read_phase_ && read_idle_ && t - read_idle_since_ > phase_gap_) end_phase(lock);
        if (t - last_sent > std::min(kPoll, lease_ / 3)) {
          Harmonia__Control__Heartbeat body = HARMONIA__CONTROL__HEARTBEAT__INIT;
          (void)post(lock, HARMONIA__CONTROL__ENVELOPE__BODY_HEARTBEAT,
                     &Harmonia__Control__Envelope::heartbeat, body);
        }
        sending.swap(outbox_);
        if (replied_ + 1 < next_seq_ && t - last_heard > silence_limit_) lost = true;
        if (stopping_ && sending.empty()) lost = true;
      }
      for (const std::string& frame : sending) {
        if (!common::send_all(fd, frame)) {
          lost = true;
          break;
        }
        last_sent = now();
      }
      if (!lost && (polled[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        uint8_t chunk[65536];
        const ssize_t n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
        if (n > 0) {
          input.insert(input.end(), chunk, chunk + n);
          last_heard = now();
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          lost = true;
        }
        std::lock_guard lock(mutex_);
        if (!receive_frames(input)) lost = true;
        changed_.notify_all();
      }
      if (lost) {
        close_kept(fd);
        fd = -1;
        std::lock_guard lock(mutex_);
        connected_ = false;
        fall_back();
        changed_.notify_all();
        if (stopping_) return;
        if (via_node_agent_)
          report("HARMONIA_AGENT=" + node_agent_ +
                 ": lost the node agent; speaking to the scheduler daemon directly");
        else
          report("HARMONIA_SCHEDD=" + address_ +
                 ": lost the scheduler daemon; writing through until it is back");
      }
    }
  }

  void report_once_unreachable() {
    if (!warned_unreachable_)
      report("HARMONIA_SCHEDD=" + address_ +
             ": cannot reach the scheduler daemon; writing through until it is reachable");
    warned_unreachable_ = true;
  }

  std::string address_;
  std::string node_agent_;  ///< HARMONIA_AGENT: the node agent's socket, tried first
  bool node_agent_refused_ = false;
  bool via_node_agent_ = false;  ///< the connection is to the node agent (run's thread only)
  pid_t pid_;
  double phase_gap_ = 1.0;
  /// How long the daemon may stay silent with a request outstanding before the process writes
  /// through (HARMONIA_SCHEDD_TIMEOUT); a registration waits as long for its answer.
  double silence_limit_ = 1.0;
  int wake_[2] = {-1, -1};
  std::thread thread_;

  std::mutex mutex_;
  std::condition_variable changed_;
  bool attempted_ = false;  ///< the first connection attempt is over
  bool connected_ = false;
  bool unregistered_ = false;  ///< this process said it leaves (shutdown)
  bool stopping_ = false;
  bool refused_ = false;
  bool warned_unreachable_ = false;
  bool wants_flush_ = false;
  bool detected_phase_ = false;
  std::atomic<bool> in_phase_{false};
  std::atomic<bool> declared_{false};
  std::deque<std::string> outbox_;
  uint64_t next_seq_ = 1, replied_ = 0;
  double lease_ = 10;
  std::vector<uint32_t> servers_;
  std::atomic<bool> await_grant_{false};
  // The read phase (HARMONIA_PREFETCH).
  bool read_phase_ = false;  ///< the phase in progress is the read phase begin_read_phase began
  bool read_done_ = false;   ///< it ended: the files are not announced again
  bool read_idle_ = false;   ///< no descriptor of an announced file is open, since:
  double read_idle_since_ = 0;
  std::shared_ptr<const ReadGrant> read_grant_;
  std::atomic<std::uint64_t> read_grant_version_{0};
  bool flusher_started_ = false;
  // Open-to-open coherence (settle_elsewhere, settle_for_others).
  struct SettleOrder {
    uint64_t id;
    std::string path;
    bool same_host;  ///< device and inode mean something here
    dev_t device;
    ino_t inode;
  };
  std::string host_;
  std::map<uint64_t, SettleStart> settle_started_;  ///< by the SettleFile's seq
  std::map<uint64_t, bool> settle_completed_;       ///< by settle id: unavailable
  double node_wait_ = environment().config.node_wait;
  std::deque<SettleOrder> settle_orders_;
  bool settler_started_ = false;
  std::condition_variable settle_signal_;
  bool flush_wanted_ = false;
  std::condition_variable flush_signal_;

  std::atomic<double> min_gap_{0};
  std::atomic<double> next_write_{0};
  std::atomic<double> last_write_{0};
};

/// The daemon (HARMONIA_SCHEDD), or nullptr: none, or an environment the library cannot use
/// (then the program's I/O is plain, and the daemon does not see it).
const char* address() {
  const Environment& env = environment();
  return env.schedd.empty() || !env.errors.empty() ? nullptr : env.schedd.c_str();
}

std::mutex creation;
std::atomic<Agent*> current{nullptr};

/// This process's agent (created on first use; a forked child makes its own), or nullptr.
Agent* get() {
  if (!address()) return nullptr;
  Agent* a = current.load(std::memory_order_acquire);
  if (a && a->pid() == getpid()) return a;
  std::lock_guard lock(creation);
  a = current.load();
  if (a && a->pid() == getpid()) return a;
  // Never destroyed: its thread lives as long as the process. A parent's agent, inherited by a
  // forked child, is abandoned (its thread did not survive the fork).
  a = new Agent(address());
  current.store(a, std::memory_order_release);
  return a;
}

}  // namespace

bool configured() { return address() != nullptr; }

void set_file_layer(const FileLayer& layer) {
  staged_bytes_of.store(layer.staged_bytes, std::memory_order_release);
  settle_for_reader_of.store(layer.settle_for_reader, std::memory_order_release);
  flush_all_of.store(layer.flush_all, std::memory_order_release);
}

void start_for_prefetch() {
  // The environment is read once, at its first use: a program without HARMONIA_PREFETCH may
  // still set the other variables in main, before its first I/O.
  const char* prefetch = std::getenv("HARMONIA_PREFETCH");
  if (prefetch && *prefetch && !environment().prefetch.empty()) (void)get();
}

namespace {
thread_local bool reader_waiting = false;
}  // namespace

ReaderWaiting::ReaderWaiting() { reader_waiting = true; }
ReaderWaiting::~ReaderWaiting() { reader_waiting = false; }

void before_flush(const FileId& file) {
  if (reader_waiting) return;  // another process waits to open the file: no turn to wait for
  if (Agent* a = get()) a->before_flush(file);
}

void after_flush(size_t still_staged) {
  if (Agent* a = get()) a->after_flush(still_staged);
}

void before_write(size_t) {
  if (Agent* a = get()) a->before_write();
}

void phase_begin(const std::string& name, size_t expected_bytes) {
  if (Agent* a = get()) a->begin_phase(name, expected_bytes, false);
}

void phase_end() {
  if (Agent* a = get()) a->end_phase();
}

std::uint64_t directive_version() { return published_version.load(std::memory_order_acquire); }

Directive directive() {
  std::lock_guard lock(published_mutex);
  return published_directive();
}

void publish(Directive next) {
  std::lock_guard lock(published_mutex);
  next.version = published_directive().version + 1;
  published_directive() = std::move(next);
  // After the directive: a reader that sees the version sees what it counts.
  published_version.store(published_directive().version, std::memory_order_release);
}

std::vector<uint32_t> servers() {
  Agent* a = get();
  return a ? a->servers() : std::vector<uint32_t>{};
}

int settle_elsewhere(const std::string& path, dev_t device, ino_t inode, bool buffered) {
  Agent* a = get();
  return a ? a->settle_elsewhere(path, device, inode, buffered) : 0;
}

std::optional<bool> drain_through_scheduler(const std::string& name, ino_t inode,
                                            const std::vector<std::string>& nodes, double wait,
                                            const char* reason) {
  Agent* a = get();
  return a ? a->drain_through_scheduler(name, inode, nodes, wait, reason) : std::nullopt;
}

std::optional<HeldByNodes> held_by_nodes(ino_t inode) {
  Agent* a = get();
  return a ? a->held_by_nodes(inode) : std::nullopt;
}

bool begin_read_phase() {
  Agent* a = get();
  return a && a->begin_read_phase();
}

void read_idle() {
  if (Agent* a = get()) a->read_idle();
}

bool ReadGrant::serves(const std::string& name) const {
  return !nodes.empty() && stripe > 0 && std::binary_search(files.begin(), files.end(), name);
}

std::shared_ptr<const ReadGrant> read_grant() {
  // No daemon: serves nothing. Never destroyed: wrappers run until the very end of the process.
  static const auto* none = new std::shared_ptr<const ReadGrant>(new ReadGrant());
  Agent* a = get();
  return a ? a->read_grant() : *none;
}

std::uint64_t read_grant_version() {
  Agent* a = get();
  return a ? a->read_grant_version() : 0;
}

void shutdown() {
  Agent* a = current.load(std::memory_order_acquire);
  if (a && a->pid() == getpid()) a->shutdown();
}

}  // namespace harmonia::bbio::agent
