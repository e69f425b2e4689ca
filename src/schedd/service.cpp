#include "schedd/service.hpp"

#include <pwd.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <stdexcept>

#include "common/file_name.hpp"
#include "common/log.hpp"

namespace harmonia::schedd {

namespace coord = core::coordination;
using control::Envelope;
using control::Error;

namespace {

constexpr size_t kMaxKeyLength = 256;
constexpr size_t kMaxQosLength = 64;
constexpr size_t kMaxPathLength = 4096;
/// Files being settled at once, over all processes (each process settles one at a time).
constexpr size_t kMaxSettles = 4096;
/// How long a settle waits for the processes asked before it completes without them.
constexpr double kSettleWait = 2.0;
/// Files one read phase may announce.
constexpr int kMaxReadFiles = 1024;

void set_error(Envelope& reply, Error::Code code, const std::string& message) {
  auto* error = reply.mutable_error();
  error->set_code(code);
  error->set_message(message);
}

/// A duration for a log line: "12.5 s".
std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", value);
  return text;
}

}  // namespace

Service::Service(ServiceConfig config, double now)
    : config_(std::move(config)),
      started_(now),
      coordinator_(coord::make_coordinator(config_.strategy, config_.coordinator)),
      jobs_(config_.buffers.has_value()) {
  if (!(config_.lease_seconds > 0)) throw std::invalid_argument("lease_seconds must be > 0");
  if (config_.buffers) {
    broker_ = std::make_unique<BufferBroker>(*config_.buffers, now, jobs_);
    node_connection_.assign(static_cast<size_t>(config_.buffers->count), 0);
  }
}

void Service::on_connect(ConnectionId connection, std::optional<uid_t> uid, double now) {
  Connection fresh;
  fresh.uid = uid;
  fresh.last_seen = now;
  connections_[connection] = fresh;
}

void Service::on_malformed(ConnectionId connection, double, std::vector<Outgoing>& out) {
  ++requests_;
  Envelope reply;
  set_error(reply, Error::CODE_MALFORMED, "the frame does not hold a valid Envelope");
  out.push_back({connection, std::move(reply)});
}

void Service::on_message(ConnectionId connection, const Envelope& request, double now,
                         std::vector<Outgoing>& out) {
  ++requests_;
  const auto it = connections_.find(connection);
  if (it == connections_.end()) return;  // the server reports only connections it announced
  it->second.last_seen = now;
  Envelope reply;
  reply.set_seq(request.seq());
  std::vector<Outgoing> pushes;  // to other connections, after the reply
  handle(connection, it->second, request, now, reply, pushes);
  if (broker_) decide_buffers(it->second, now, reply);
  out.push_back({connection, std::move(reply)});
  const size_t before = out.size();
  std::move(pushes.begin(), pushes.end(), std::back_inserter(out));
  push_changes(connection, out);
  pushes_ += out.size() - before;
}

void Service::handle(ConnectionId id, Connection& connection, const Envelope& request, double now,
                     Envelope& reply, std::vector<Outgoing>& out) {
  using Body = Envelope::BodyCase;
  const Body body = request.body_case();
  if (body == Body::kAuthenticate) {
    authenticate(connection, request.authenticate(), reply);
    return;
  }
  if (!connection.uid) {
    set_error(reply, Error::CODE_UNAUTHENTICATED,
              "this connection has no identity: from another host, send Authenticate with a "
              "MUNGE credential first (harmonia-schedd --auth munge)");
    return;
  }
  switch (body) {
    case Body::kRegisterProcess:
      register_process(id, connection, request.register_process(), now, reply);
      return;
    case Body::kStatusRequest:
      fill_status(now, *reply.mutable_status());
      return;
    case Body::kRegisterBuffer:
      register_buffer(id, connection, request.register_buffer(), reply);
      return;
    case Body::kBufferReport:
      if (connection.buffer_node < 0) {
        set_error(reply, Error::CODE_NOT_REGISTERED, "send RegisterBuffer first");
        return;
      }
      broker_->node_report(connection.buffer_node, request.buffer_report(), now);
      note_held(connection.buffer_node, request.buffer_report(), out);
      reply.mutable_drain_order();  // filled by decide_buffers, after the policy has decided
      return;
    case Body::kHeartbeat:
    case Body::kPhaseBegin:
    case Body::kPhaseEnd:
    case Body::kFlushRequest:
    case Body::kFlushDone:
    case Body::kUnregister:
    case Body::kSettleFile:
    case Body::kSettleDone:
    case Body::kAnnounceRead:
      break;
    case Body::kRegistered:
    case Body::kDirective:
    case Body::kStatus:
    case Body::kError:
    case Body::kBufferRegistered:
    case Body::kDrainOrder:
    case Body::kSettleStarted:
    case Body::kSettleOrder:
    case Body::kSettleComplete:
    case Body::kAuthenticated:
      set_error(reply, Error::CODE_NOT_A_REQUEST, "replies and pushes go from the daemon only");
      return;
    case Body::kAuthenticate:  // handled above
    case Body::BODY_NOT_SET:
      set_error(reply, Error::CODE_UNKNOWN_MESSAGE,
                "no message this daemon knows (protocol version " +
                    std::to_string(control::VERSION_CURRENT) + ")");
      return;
  }
  if (connection.job == kNoJob) {
    if (body == Body::kHeartbeat) {
      reply.mutable_directive();  // a ping from a tool: the default directive
      return;
    }
    set_error(reply, Error::CODE_NOT_REGISTERED, "send RegisterProcess first");
    return;
  }
  const JobNumber job = connection.job;
  switch (body) {
    case Body::kPhaseBegin:
      set_phase(connection, job, true, now,
                static_cast<double>(request.phase_begin().expected_bytes()),
                request.phase_begin().read());
      break;
    case Body::kAnnounceRead:
      if (!announce_read(job, request.announce_read(), now, reply)) return;
      break;
    case Body::kPhaseEnd:
      set_phase(connection, job, false, now);
      break;
    case Body::kFlushRequest:
      set_wants_flush(connection, job, true, now);
      break;
    case Body::kFlushDone:
      set_wants_flush(connection, job, false, now);
      break;
    case Body::kUnregister: {
      leave(id, connection, now);
      // It wrote out what it staged before it left: no settle waits for its answer.
      drop_from_settles(id);
      finish_settles(out);
      reply.mutable_directive();  // nothing holds it any more: write through
      return;
    }
    case Body::kSettleFile:
      start_settle(id, request.settle_file(), now, reply, out);
      if (reply.has_settle_started())
        fill_directive(job, *reply.mutable_settle_started()->mutable_directive());
      return;
    case Body::kSettleDone:
      settle_done(id, request.settle_done().id(), out);
      break;
    default:
      break;
  }
  fill_directive(job, *reply.mutable_directive());
}

void Service::start_settle(ConnectionId id, const control::SettleFile& file, double now,
                           Envelope& reply, std::vector<Outgoing>& out) {
  if ((file.path().empty() && !file.stat_only()) || file.path().size() > kMaxPathLength ||
      file.host().size() > kMaxKeyLength || !(file.node_wait() >= 0)) {
    set_error(reply, Error::CODE_INVALID,
              "SettleFile.path must be 1 to 4096 bytes (or empty for a stat), host at most 256, "
              "node_wait a number of seconds");
    return;
  }
  // What the buffer nodes hold of it: a stat shows it over the PFS file, an open waits for it.
  const HeldFiles::File* held = file.buffered() ? held_.find(file.inode()) : nullptr;
  auto* started = reply.mutable_settle_started();
  if (held) {
    started->set_held(true);
    started->set_held_size(held->size());
    started->set_held_mtime_ns(held->mtime_ns());
    started->set_held_handle(held->handle);
  }
  if (file.stat_only()) return;
  if (settles_.size() >= kMaxSettles) {
    set_error(reply, Error::CODE_INVALID,
              "too many files being settled at once (" + std::to_string(kMaxSettles) + ")");
    return;
  }
  // The ranks of a job open a shared file together: one settle of the file serves them all.
  for (auto& [settle, pending] : settles_)
    if (!file.own() && !pending.file.own() && pending.file.path() == file.path() &&
        pending.file.host() == file.host() && pending.file.inode() == file.inode() &&
        pending.file.buffered() == file.buffered()) {
      pending.requesters.push_back(id);
      started->set_id(settle);
      started->set_waiting(
          static_cast<std::uint32_t>(pending.waiting.size() + pending.nodes.size()));
      return;
    }
  const std::uint64_t settle = ++last_settle_;
  Settle pending{{id}, file, now + kSettleWait, {}, {}, now + std::min(file.node_wait(), 3600.0)};
  // The nodes holding its bytes, as their reports say and as the caller wrote it, drain it
  // before anything else (one flow of drains: the scheduler orders every one), and tell when
  // they have.
  const std::string name = held ? held->name : file.path();
  if (held)
    for (const auto& [node, holding] : held->nodes) pending.nodes.insert(node);
  for (const auto& address : file.nodes()) {
    const auto node = broker_ ? broker_->node_slot(address) : std::nullopt;
    if (node)
      pending.nodes.insert(*node);
    else
      pending.unknown_node = true;
  }
  for (const int node : pending.nodes) order_urgent(node, file.inode(), name);
  if (!pending.nodes.empty())
    ++urgent_by_reason_[file.reason().empty() ? std::string("open") : file.reason()];
  for (const auto& [other, c] : connections_) {
    // A node agent opening the file has other ranks behind it, which it asks itself. A drain
    // of the caller's own bytes asks nobody else.
    if (file.own() || (other == id && !c.node_agent) || c.job == kNoJob) continue;
    pending.waiting.insert(other);
    Envelope push;
    push.mutable_settle_order()->set_id(settle);
    *push.mutable_settle_order()->mutable_file() = file;
    out.push_back({other, std::move(push)});
  }
  started->set_id(settle);
  started->set_waiting(static_cast<std::uint32_t>(pending.waiting.size() + pending.nodes.size() +
                                                  (pending.unknown_node ? 1 : 0)));
  if (!pending.waiting.empty() || !pending.nodes.empty() || pending.unknown_node)
    settles_.emplace(settle, std::move(pending));
}

void Service::order_urgent(int node, std::uint64_t inode, const std::string& name) {
  auto& urgent = urgent_[node];
  if (urgent.count(inode)) return;  // already ordered: the settles share it
  urgent[inode] = {name, ++last_urgent_};
  urgent_changed_.insert(node);
}

void Service::urgent_settled(int node, std::uint64_t inode, std::vector<Outgoing>& out) {
  if (urgent_[node].erase(inode) > 0) urgent_changed_.insert(node);
  for (auto& [settle, pending] : settles_)
    if (pending.file.inode() == inode) pending.nodes.erase(node);
  finish_settles(out);
}

void Service::note_held(int node, const control::BufferReport& report, std::vector<Outgoing>& out) {
  for (const std::uint64_t inode : held_.report(node, report)) urgent_settled(node, inode, out);
  for (const std::uint64_t id : report.urgent_done()) {
    const auto& urgent = urgent_[node];
    const auto done = std::find_if(urgent.begin(), urgent.end(),
                                   [id](const auto& entry) { return entry.second.id == id; });
    if (done != urgent.end()) urgent_settled(node, done->first, out);
  }
}

bool Service::node_connected(int node) const {
  const ConnectionId monitor = node_connection_[static_cast<size_t>(node)];
  return monitor != 0 && connections_.count(monitor) > 0;
}

void Service::fill_order(int node, control::DrainOrder& out) const {
  broker_->fill_order(node, out);
  const auto found = urgent_.find(node);
  if (found == urgent_.end()) return;
  for (const auto& [inode, urgent] : found->second) {
    auto* entry = out.add_urgent();
    entry->set_inode(inode);
    entry->set_name(urgent.name);
    entry->set_id(urgent.id);
  }
}

void Service::settle_done(ConnectionId id, std::uint64_t settle, std::vector<Outgoing>& out) {
  const auto found = settles_.find(settle);
  if (found == settles_.end()) return;
  found->second.waiting.erase(id);
  if (found->second.waiting.empty() && found->second.nodes.empty() && !found->second.unknown_node)
    complete_settle(found, out);
}

Service::Settles::iterator Service::complete_settle(Settles::iterator it,
                                                    std::vector<Outgoing>& out) {
  for (ConnectionId requester : it->second.requesters) {
    if (!connections_.count(requester)) continue;
    Envelope push;
    push.mutable_settle_complete()->set_id(it->first);
    const bool unavailable = !it->second.nodes.empty() || it->second.unknown_node;
    push.mutable_settle_complete()->set_complete(it->second.waiting.empty() && !unavailable);
    push.mutable_settle_complete()->set_unavailable(unavailable);
    out.push_back({requester, std::move(push)});
  }
  return settles_.erase(it);
}

void Service::finish_settles(std::vector<Outgoing>& out, std::optional<double> now) {
  for (auto it = settles_.begin(); it != settles_.end();) {
    const Settle& settle = it->second;
    const bool processes_done = settle.waiting.empty() || (now && *now >= settle.deadline);
    // A node that drains is waited for as long as it takes (the file's bytes are on their way,
    // as an fsync's are); one that is down, until the caller's wait has passed.
    const bool nodes_done =
        (settle.nodes.empty() && !settle.unknown_node) ||
        (now && *now >= settle.node_deadline &&
         (settle.unknown_node || std::any_of(settle.nodes.begin(), settle.nodes.end(),
                                             [this](int node) { return !node_connected(node); })));
    it = processes_done && nodes_done ? complete_settle(it, out) : std::next(it);
  }
}

void Service::drop_from_settles(ConnectionId id) {
  for (auto it = settles_.begin(); it != settles_.end();) {
    auto& requesters = it->second.requesters;
    it->second.waiting.erase(id);
    requesters.erase(std::remove(requesters.begin(), requesters.end(), id), requesters.end());
    it = requesters.empty() ? settles_.erase(it) : std::next(it);
  }
}

void Service::register_process(ConnectionId id, Connection& connection,
                               const control::RegisterProcess& request, double now,
                               Envelope& reply) {
  if (connection.job != kNoJob) {
    set_error(
        reply, Error::CODE_ALREADY_REGISTERED,
        "this connection already stands for a process of job " + jobs_.at(connection.job).key);
    return;
  }
  if (request.protocol_version() != control::VERSION_CURRENT) {
    set_error(reply, Error::CODE_VERSION,
              "protocol version " + std::to_string(request.protocol_version()) +
                  " is not supported (this daemon speaks " +
                  std::to_string(control::VERSION_CURRENT) + ")");
    return;
  }
  if (request.job().empty() || request.job().size() > kMaxKeyLength ||
      request.name().size() > kMaxKeyLength) {
    set_error(reply, Error::CODE_INVALID,
              "RegisterProcess.job must be 1 to 256 bytes, name at most 256");
    return;
  }
  if (request.ranks() > config_.max_ranks) {
    set_error(reply, Error::CODE_INVALID,
              "RegisterProcess.ranks " + std::to_string(request.ranks()) +
                  " is more than this site allows (" + std::to_string(config_.max_ranks) +
                  ", --max-ranks)");
    return;
  }
  if (!(request.bytes_per_process() >= 0) || request.bytes_per_process() > 1e18) {
    set_error(reply, Error::CODE_INVALID, "RegisterProcess.bytes_per_process out of range");
    return;
  }
  if (request.io_qos().size() > kMaxQosLength) {
    set_error(reply, Error::CODE_INVALID, "RegisterProcess.io_qos must be at most 64 bytes");
    return;
  }
  if (config_.buffers && !request.io_qos().empty()) {
    try {
      config_.buffers->pricing.resolve(request.io_qos());
    } catch (const std::invalid_argument& e) {
      set_error(reply, Error::CODE_INVALID, std::string("RegisterProcess.") + e.what());
      return;
    }
  }
  // Job keys are per user: a key names one of the registering user's jobs, so nobody can take
  // (or squat) another user's job by naming its key first.
  const std::string key = std::to_string(*connection.uid) + "/" + request.job();
  std::optional<JobNumber> found = jobs_.live(key);
  if (!found) {
    JobRecord record;
    record.key = key;
    record.label = request.job();
    if (!request.name().empty() && request.name() != request.job()) record.named = request.name();
    record.uid = *connection.uid;
    record.ranks = std::max<std::uint32_t>(1, request.ranks());
    record.priority = request.priority();
    record.registered_at = now;
    const coord::JobInfo info{record.name(),
                              static_cast<int>(std::min<std::uint32_t>(record.ranks, 1u << 30)),
                              request.bytes_per_process(), record.priority};
    found = jobs_.add(std::move(record));
    // Both policy cores number jobs as the table does: in the order they registered.
    if (coordinator_->on_register(info, now) != *found)
      throw std::logic_error("the job table's and the coordinator's numbers diverged");
    if (broker_)
      broker_->add_job(*found, request.bytes_per_process() * jobs_.at(*found).ranks,
                       request.cached(), now, request.io_qos());
  }
  const JobNumber job = *found;
  jobs_.at(job).live->processes.insert(id);
  connection.job = job;
  connection.node_agent = request.node_agent();
  // A process re-registering with a restarted daemon brings its state back.
  if (request.in_phase()) set_phase(connection, job, true, now);
  if (request.wants_flush()) set_wants_flush(connection, job, true, now);
  auto* registered = reply.mutable_registered();
  registered->set_protocol_version(control::VERSION_CURRENT);
  registered->set_lease_seconds(config_.lease_seconds);
  fill_directive(job, *registered->mutable_directive());
}

bool Service::announce_read(JobNumber job, const control::AnnounceRead& request, double now,
                            Envelope& reply) {
  if (request.files_size() > kMaxReadFiles) {
    set_error(reply, Error::CODE_INVALID,
              "AnnounceRead: " + std::to_string(request.files_size()) + " files, at most " +
                  std::to_string(kMaxReadFiles));
    return false;
  }
  std::vector<BufferBroker::ReadFile> files;
  for (int i = 0; i < request.files_size(); ++i) {
    const auto& file = request.files(i);
    if (!common::plain_relative_name(file.file())) {
      set_error(reply, Error::CODE_INVALID,
                "AnnounceRead.files[" + std::to_string(i) + "] '" + file.file().substr(0, 256) +
                    "': not a path relative to the PFS root (1 to 4096 bytes, no NUL, no empty, "
                    "'.' or '..' part, parts of at most 255 bytes)");
      return false;
    }
    files.push_back({file.file(), file.size()});
  }
  // The nodes copy the files with the job's user's rights: a job whose user this host does not
  // know reads the PFS.
  if (!broker_) return true;
  passwd entry{};
  passwd* user = nullptr;
  std::vector<char> text(16384);
  const uid_t uid = jobs_.at(job).uid;
  if (getpwuid_r(uid, &entry, text.data(), text.size(), &user) != 0 || !user) return true;
  broker_->announce_read(job, files, uid, user->pw_gid, now);
  return true;
}

void Service::set_phase(Connection& connection, JobNumber job, bool in_phase, double now,
                        double expected_bytes, bool read) {
  if (connection.in_phase == in_phase) return;
  connection.in_phase = in_phase;
  LiveJob& record = *jobs_.at(job).live;
  if (in_phase) {
    record.phases += 1;  // a process began one
    if (record.in_phase++ > 0) return;
    coordinator_->on_io_begin(job, now);
    // A declared size is per process; the phase is the whole job's.
    if (broker_) broker_->phase_begin(job, expected_bytes * jobs_.at(job).ranks, now, read);
  } else {
    if (--record.in_phase > 0) return;
    coordinator_->on_io_end(job, now);
    if (broker_) broker_->phase_end(job, now);
  }
}

void Service::authenticate(Connection& connection, const control::Authenticate& request,
                           Envelope& reply) {
  if (connection.uid) {  // the kernel's word, or an earlier credential: this one may confirm it
    std::string why;
    if (config_.confirm_credential &&
        !config_.confirm_credential(*connection.uid, request.credential(), why)) {
      set_error(reply, Error::CODE_UNAUTHENTICATED, why);
      return;
    }
    reply.mutable_authenticated()->set_uid(*connection.uid);
    return;
  }
  std::string why =
      "this daemon takes no credentials (--auth peer: it knows its peers from the kernel; peers "
      "on other hosts need --auth munge)";
  const auto identity =
      config_.check_credential ? config_.check_credential(request.credential(), why) : std::nullopt;
  if (!identity) {
    set_error(reply, Error::CODE_UNAUTHENTICATED, why);
    return;
  }
  connection.uid = identity->uid;
  auto* authenticated = reply.mutable_authenticated();
  authenticated->set_uid(identity->uid);
  authenticated->set_gid(identity->gid);
}

void Service::register_buffer(ConnectionId id, Connection& connection,
                              const control::RegisterBuffer& request, Envelope& reply) {
  if (!broker_) {
    set_error(reply, Error::CODE_INVALID, "this daemon runs without buffer nodes (--buffers)");
    return;
  }
  if (connection.buffer_node >= 0 || connection.job != kNoJob) {
    set_error(reply, Error::CODE_ALREADY_REGISTERED, "this connection is already registered");
    return;
  }
  if (request.protocol_version() != control::VERSION_CURRENT) {
    set_error(
        reply, Error::CODE_VERSION,
        "protocol version " + std::to_string(request.protocol_version()) + " is not supported");
    return;
  }
  if (request.address().empty() || request.address().size() > kMaxKeyLength) {
    set_error(reply, Error::CODE_INVALID, "RegisterBuffer.address must be 1 to 256 bytes");
    return;
  }
  // A node receives jobs' data: only the site's node accounts may stand for one.
  if (*connection.uid != 0 && std::find(config_.node_uids.begin(), config_.node_uids.end(),
                                        *connection.uid) == config_.node_uids.end()) {
    set_error(reply, Error::CODE_FORBIDDEN,
              "RegisterBuffer from uid " + std::to_string(*connection.uid) +
                  ": buffer nodes run as root or as a user named with --buffer-node-uid");
    return;
  }
  if (const auto held = broker_->node_slot(request.address())) {
    const ConnectionId monitor = node_connection_[static_cast<size_t>(*held)];
    if (monitor != 0 && connections_.count(monitor)) {
      set_error(reply, Error::CODE_FORBIDDEN,
                "RegisterBuffer.address " + request.address() +
                    " belongs to a node that is connected (buffer " + std::to_string(*held) + ")");
      return;
    }
  }
  const auto slot = broker_->register_node(request.address());
  if (!slot) {
    set_error(reply, Error::CODE_INVALID,
              "all " + std::to_string(node_connection_.size()) +
                  " buffer slots belong to other nodes (--buffers)");
    return;
  }
  connection.buffer_node = *slot;
  node_connection_[static_cast<size_t>(*slot)] = id;
  auto* registered = reply.mutable_buffer_registered();
  registered->set_index(static_cast<std::uint32_t>(*slot));
  registered->set_report_seconds(broker_->config().report_seconds);
  fill_order(*slot, *registered->mutable_order());
}

void Service::decide_buffers(const Connection& connection, double now, Envelope& reply) {
  broker_->decide_if_changed(now);
  if (reply.has_drain_order() && connection.buffer_node >= 0)
    fill_order(connection.buffer_node, *reply.mutable_drain_order());
  if (connection.job == kNoJob) return;
  if (reply.has_directive()) fill_directive(connection.job, *reply.mutable_directive());
  if (reply.has_registered())
    fill_directive(connection.job, *reply.mutable_registered()->mutable_directive());
}

void Service::set_wants_flush(Connection& connection, JobNumber job, bool wants, double now) {
  if (connection.wants_flush == wants) return;
  connection.wants_flush = wants;
  LiveJob& record = *jobs_.at(job).live;
  if (wants) {
    if (record.wants_flush++ == 0) coordinator_->on_flush_request(job, now);
  } else {
    if (--record.wants_flush == 0) coordinator_->on_flush_done(job, now);
  }
}

void Service::leave(ConnectionId id, Connection& connection, double now) {
  if (connection.job == kNoJob) return;
  const JobNumber job = connection.job;
  connection.job = kNoJob;
  set_phase(connection, job, false, now);
  set_wants_flush(connection, job, false, now);
  auto& processes = jobs_.at(job).live->processes;
  processes.erase(id);
  if (processes.empty()) {
    jobs_.end(job);
    coordinator_->on_unregister(job, now);
    if (broker_) broker_->job_end(job, now);
  }
}

void Service::on_disconnect(ConnectionId connection, double now, std::vector<Outgoing>& out) {
  const auto it = connections_.find(connection);
  if (it == connections_.end()) return;
  leave(connection, it->second, now);
  forget_node(it->second, "disconnected");
  connections_.erase(it);
  drop_from_settles(connection);
  const size_t before = out.size();
  finish_settles(out);
  if (broker_) broker_->decide_if_changed(now);
  push_changes(connection, out);
  pushes_ += out.size() - before;
}

void Service::forget_node(const Connection& connection, const std::string& why) {
  if (connection.buffer_node < 0) return;
  const std::string& address = broker_->node_address(connection.buffer_node);
  common::log::warning("buffer node " + std::to_string(connection.buffer_node) + " (" + address +
                           ") " + why +
                           ": left out of the jobs' directives until it registers again",
                       {"", connection.uid, address});
  broker_->node_gone(connection.buffer_node);
  node_connection_[static_cast<size_t>(connection.buffer_node)] = 0;
}

std::vector<ConnectionId> Service::on_tick(double now, std::vector<Outgoing>& out) {
  std::vector<ConnectionId> expired;
  for (const auto& [id, connection] : connections_)
    if (now - connection.last_seen > config_.lease_seconds) expired.push_back(id);
  for (ConnectionId id : expired) {
    leave(id, connections_.at(id), now);
    forget_node(connections_.at(id),
                "stopped reporting (silent for " + seconds(now - connections_.at(id).last_seen) +
                    ", past the lease of " + seconds(config_.lease_seconds) + ")");
    connections_.erase(id);
    drop_from_settles(id);
  }
  const size_t before = out.size();
  finish_settles(out, now);
  coordinator_->on_tick(now);
  if (broker_) broker_->tick(now);
  push_changes(0, out);
  pushes_ += out.size() - before;
  return expired;
}

void Service::push_changes(ConnectionId except, std::vector<Outgoing>& out) {
  const auto changed = coordinator_->take_changed();
  for (const coord::JobId job : changed)
    if (!jobs_.at(job).ended()) push_directive(job, except, out);
  if (!broker_) return;
  for (const JobNumber job : broker_->take_changed_jobs())
    // One push per change, whichever side changed the directive.
    if (std::find(changed.begin(), changed.end(), job) == changed.end())
      push_directive(job, except, out);
  std::set<int> nodes;
  nodes.swap(urgent_changed_);
  for (int node : broker_->take_changed_nodes()) nodes.insert(node);
  for (int node : nodes) {
    const ConnectionId monitor = node_connection_[static_cast<size_t>(node)];
    if (monitor == 0 || monitor == except) continue;
    Envelope push;
    fill_order(node, *push.mutable_drain_order());
    out.push_back({monitor, std::move(push)});
  }
}

void Service::push_directive(JobNumber job, ConnectionId except, std::vector<Outgoing>& out) {
  LiveJob& record = *jobs_.at(job).live;
  record.epoch += 1;
  for (ConnectionId process : record.processes) {
    if (process == except) continue;  // its reply carries the directive
    Envelope push;
    fill_directive(job, *push.mutable_directive());
    out.push_back({process, std::move(push)});
  }
}

void Service::fill_directive(JobNumber job, control::Directive& out) const {
  // A reply's directive is filled again once the policy has decided: anew, not appended to.
  out.Clear();
  const coord::Directive& d = coordinator_->directive(job);
  out.set_mode(d.mode == coord::Mode::Stage ? control::MODE_STAGE : control::MODE_WRITE_THROUGH);
  out.set_flush_allowed(d.flush_allowed);
  for (int server : d.servers) out.add_servers(static_cast<std::uint32_t>(server));
  out.set_min_request_gap(d.min_request_gap);
  out.set_epoch(jobs_.at(job).live->epoch);
  if (broker_) broker_->fill_directive(job, out);
}

void Service::fill_status(double now, control::Status& out) const {
  out.set_strategy(config_.strategy);
  const char* orders[] = {"free", "token", "window", "priority"};
  out.set_flush_order(orders[static_cast<int>(config_.coordinator.flush_order)]);
  out.set_pfs_servers(static_cast<std::uint32_t>(config_.coordinator.pfs_servers));
  out.set_uptime_seconds(now - started_);
  out.set_requests(requests_);
  out.set_pushes(pushes_);
  out.set_connections(static_cast<std::uint32_t>(connections_.size()));
  for (const JobNumber number : jobs_.live_by_key()) {
    const JobRecord& job = jobs_.at(number);
    auto* s = out.add_jobs();
    s->set_job(job.label);
    s->set_uid(job.uid);
    const LiveJob& live = *job.live;
    s->set_name(job.name());
    s->set_processes(static_cast<std::uint32_t>(live.processes.size()));
    s->set_ranks(job.ranks);
    s->set_priority(job.priority);
    s->set_in_phase(live.in_phase);
    s->set_wants_flush(live.wants_flush);
    fill_directive(number, *s->mutable_directive());
    s->set_registered_seconds(now - job.registered_at);
    s->set_phases(live.phases);
    if (broker_) s->set_wait_seconds(broker_->wait_seconds(number, now));
  }
  if (broker_) broker_->fill_status(out);
  for (const auto& [reason, count] : urgent_by_reason_) {
    auto* drains = out.add_urgent_drains();
    drains->set_reason(reason);
    drains->set_count(count);
  }
}

std::pair<std::optional<uid_t>, std::string> Service::who(ConnectionId connection) const {
  const auto found = connections_.find(connection);
  if (found == connections_.end()) return {std::nullopt, ""};
  const JobNumber job = found->second.job;
  return {found->second.uid, job == kNoJob ? std::string() : jobs_.at(job).key};
}

}  // namespace harmonia::schedd
