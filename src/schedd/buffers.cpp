#include "schedd/buffers.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "core/registry.hpp"
#include "simkit/records.hpp"

namespace harmonia::schedd {

namespace {

/// Distinct read phases one job may announce.
constexpr std::size_t kMaxReadLists = 4096;

/// The ids marked since the last call, each once; the list is emptied.
std::vector<int> take_distinct(std::vector<int>& marked) {
  std::vector<int> out;
  out.swap(marked);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

core::SchedulerConfig BufferConfig::scheduler_config() const {
  if (count < 1) throw std::invalid_argument("buffers: count must be >= 1");
  if (!(capacity > 0)) throw std::invalid_argument("buffers: capacity must be > 0");
  if (!(write_bw > 0) || !(read_bw > 0) || !(link_bw > 0))
    throw std::invalid_argument("buffers: bandwidths must be > 0");
  if (!(flush_threshold >= 0 && flush_threshold <= 1))
    throw std::invalid_argument("buffers: flush threshold must be in [0, 1]");
  if (backup_flushers < 0 || backup_flushers >= count)
    throw std::invalid_argument("buffers: backup flushers must be in [0, count)");
  if (!(phase_bytes > 0)) throw std::invalid_argument("buffers: phase bytes must be > 0");
  if (stripe_bytes < 4096 || stripe_bytes > (16u << 20))
    throw std::invalid_argument("buffers: stripe must be 4 KiB to 16 MiB");
  if (!(report_seconds > 0)) throw std::invalid_argument("buffers: report period must be > 0");
  pricing.validate();
  core::SchedulerConfig cfg(
      core::DeviceModel::from_slope("buffer", write_bw, read_bw, concurrency, interference_slope));
  cfg.buffer_count = count;
  cfg.buffer_capacity = capacity;
  cfg.buffer_link_bw = link_bw;
  cfg.client_node_bw = link_bw;
  cfg.flush_threshold = flush_threshold;
  cfg.backup_flushers = backup_flushers;
  cfg.max_colocated = max_colocated;
  cfg.max_running_apps = max_running_apps;
  cfg.min_buffers = min_buffers;
  // The share bounds a phase's nodes as it bounds its bytes: one job cannot take every node.
  cfg.max_phase_buffers =
      std::max(min_buffers, static_cast<int>(std::ceil(max_phase_share * count - 1e-9)));
  cfg.extend_reservations = extend_reservations;
  cfg.auto_objective = auto_objective;
  return cfg;
}

BufferBroker::BufferBroker(BufferConfig config, double origin, JobTable& jobs)
    : config_(std::move(config)),
      jobs_(jobs),
      nodes_(static_cast<size_t>(config_.count)),
      origin_(origin) {
  scheduler_ = core::make_scheduler(config_.policy, config_.scheduler_config(), *this);
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].order.set_epoch(1);
}

BufferBroker::~BufferBroker() = default;

double BufferConfig::phase_bound() const {
  const double share = max_phase_share * capacity * count;
  return max_phase_bytes > 0 ? std::min(max_phase_bytes, share) : share;
}

void BufferBroker::add_job(JobNumber job, double declared_bytes, bool cached, double now,
                           const std::string& io_qos) {
  const core::IoClass io_class = config_.pricing.resolve(io_qos.empty() ? "normal" : io_qos);
  advance(now);
  events_ = true;
  const JobRecord& record = jobs_.at(job);
  core::AppInfo info;
  info.name = record.name();
  info.nodes = 1;  // one machine's processes share one client link
  info.priority = record.priority;
  info.hint = cached ? core::Hint::Cached : core::Hint::Flushable;
  info.user = std::to_string(record.uid);
  info.io_qos = io_class.name;
  info.io_slowdown = io_class.slowdown;
  // DataWarp reserves what the job declares; without a declaration, one default phase.
  info.declared_bytes =
      std::min(declared_bytes > 0 ? declared_bytes : config_.phase_bytes * record.ranks,
               config_.phase_bound());
  if (scheduler_->on_app_register(info, now_) != job)
    throw std::logic_error("the job table's and the policy core's numbers diverged");
}

void BufferBroker::phase_begin(JobNumber job, double bytes, double now, bool read) {
  advance(now);
  events_ = true;
  JobRecord& record = jobs_.at(job);
  BufferPhases& state = record.buffer;
  if (state.open || record.ended()) return;
  if (read) {
    if (state.announced_read < 0) return;  // nothing staged in for it: it reads the PFS
    state.phase_index = state.announced_read;
    state.announced_read = -1;
    state.phase_bytes = reads_.at({job, state.phase_index}).bytes;
  } else {
    state.phase_index = state.next_index++;
    const double total = config_.phase_bytes * record.ranks;
    // A phase never asks for more than all buffers hold (the policies could never place it), nor
    // more than the site allows one job.
    state.phase_bytes = std::min(bytes > 0 ? bytes : total, config_.phase_bound());
  }
  state.phase_read = read;
  state.open = true;
  mark_job(job);
  if (started(job)) submit_phase(job, now_);
}

bool BufferBroker::announce_read(JobNumber job, const std::vector<ReadFile>& files,
                                 std::uint32_t uid, std::uint32_t gid, double now) {
  advance(now);
  events_ = true;
  JobRecord& record = jobs_.at(job);
  BufferPhases& state = record.buffer;
  if (record.ended() || state.announced_read >= 0 || (state.open && state.phase_read)) return false;
  ReadPlan plan;
  for (const auto& file : files) {
    plan.files.push_back(file.name);
    plan.bytes += static_cast<double>(file.size);
  }
  std::sort(plan.files.begin(), plan.files.end());
  plan.files.erase(std::unique(plan.files.begin(), plan.files.end()), plan.files.end());
  // Every process of the job announces the same list, and a process that starts late announces
  // it again after the job has read it. A job announcing list after list is heard for the first
  // kMaxReadLists; the others read the PFS.
  std::string joined;
  for (const auto& file : plan.files) joined.append(file).push_back('\0');
  if (state.announced.size() >= kMaxReadLists ||
      !state.announced.insert(std::hash<std::string>{}(joined)).second)
    return false;
  if (!(plan.bytes > 0) || plan.bytes > config_.phase_bound()) return false;
  plan.uid = uid;
  plan.gid = gid;
  state.announced_read = state.next_index++;
  reads_[{job, state.announced_read}] = std::move(plan);
  if (started(job)) submit_announced_read(job, now_);
  return true;
}

void BufferBroker::submit_announced_read(JobNumber job, double now) {
  for (auto& [key, plan] : reads_) {
    if (key.first != job || plan.submitted) continue;
    plan.submitted = true;
    core::PhaseRequest request;
    request.app = job;
    request.index = key.second;
    request.bytes = plan.bytes;
    request.op = core::Op::Read;
    scheduler_->on_prefetch_request(request, now);
  }
}

void BufferBroker::submit_phase(JobNumber job, double now) {
  const BufferPhases& state = jobs_.at(job).buffer;
  core::PhaseRequest request;
  request.app = job;
  request.index = state.phase_index;
  request.bytes = state.phase_bytes;
  if (state.phase_read) request.op = core::Op::Read;
  scheduler_->on_phase_request(request, now);
}

void BufferBroker::phase_end(JobNumber job, double now) {
  advance(now);
  events_ = true;
  BufferPhases& state = jobs_.at(job).buffer;
  if (!state.open) return;
  const core::RunningPhase* grant = current_grant(job);
  state.open = false;
  if (grant) {
    const std::vector<int> buffers = grant->buffers;  // complete_phase drops the core's record
    complete_phase(job, state.phase_index, buffers);
  } else if (started(job)) {
    // Ended before its grant (a declared phase without writes): completes once granted.
    state.ended_early.insert(state.phase_index);
  }
  mark_job(job);
}

void BufferBroker::job_end(JobNumber job, double now) {
  advance(now);
  events_ = true;
  phase_end(job, now);
  // The core accepts an application's end only once it is admitted; a queued job that leaves
  // is admitted and ended at once (it reserved nothing it used).
  if (started(job) && jobs_.at(job).buffer.ended_early.empty()) scheduler_->on_app_end(job, now_);
}

std::optional<int> BufferBroker::node_slot(const std::string& address) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].address == address) return static_cast<int>(i);
  return std::nullopt;
}

std::optional<int> BufferBroker::register_node(const std::string& address) {
  events_ = true;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].address == address) {
      nodes_[i].connected = true;
      mark_node(static_cast<int>(i));
      return static_cast<int>(i);
    }
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].address.empty()) {
      nodes_[i].address = address;
      nodes_[i].connected = true;
      mark_node(static_cast<int>(i));
      // Jobs granted this slot before its node came can use it now.
      mark_jobs_on(static_cast<int>(i));
      return static_cast<int>(i);
    }
  return std::nullopt;
}

void BufferBroker::node_report(int node, const control::BufferReport& report, double now) {
  advance(now);
  note_staged(node, report);
  NodeState& state = nodes_.at(static_cast<size_t>(node));
  // Bytes drained since the last report, of the jobs the policy knows (a restarted node counts
  // from zero again).
  double drained = 0;
  std::map<std::string, std::uint64_t> seen_now;
  for (const auto& d : report.drained()) {
    const auto seen = state.drained_by_job.find(d.job());
    const std::uint64_t before = seen == state.drained_by_job.end() ? 0 : seen->second;
    const std::uint64_t delta = d.bytes() >= before ? d.bytes() - before : d.bytes();
    seen_now[d.job()] = d.bytes();
    if (jobs_.latest(d.job())) drained += static_cast<double>(delta);
  }
  state.drained_by_job = std::move(seen_now);  // a job the node forgot counts from zero again
  state.last = report;
  state.reported = true;
  if (drained > 0) {
    scheduler_->on_drained(node, drained, now_);
    events_ = true;
  }
  // The policy accounts phases by their declared size, the node holds what was really written
  // (less when a job declares more; more when a client whose node died striped over the others).
  // Once the node has seen the current order (sent after the last phase on it completed, so its
  // report includes every write of that phase), the policy's count follows the node's.
  if (report.order_epoch() != state.order.epoch()) return;
  std::map<core::AppId, double> held;
  for (const auto& data : scheduler_->buffers()[static_cast<size_t>(node)].held) held[data.app] = 0;
  std::set<std::string> orphans;
  for (const auto& data : report.held()) {
    if (const auto job = jobs_.latest(data.job()))
      held[*job] = static_cast<double>(data.bytes());
    else
      orphans.insert(data.job());
  }
  const auto& buffer = scheduler_->buffers()[static_cast<size_t>(node)];
  const double used = buffer.used;
  const auto before = buffer.held;
  for (const auto& [app, bytes] : held) scheduler_->on_held_reported(node, app, bytes, now_);
  const auto same = [](const core::HeldData& a, const core::HeldData& b) {
    return a.app == b.app && a.phase == b.phase && a.bytes == b.bytes &&
           a.drainable == b.drainable && a.clean == b.clean;
  };
  // A report that repeats what the policy counts is no event: nothing to decide.
  if (buffer.used != used || orphans != state.orphans ||
      !std::equal(before.begin(), before.end(), buffer.held.begin(), buffer.held.end(), same))
    events_ = true;
  state.orphans = std::move(orphans);  // in the node's order from the next tick
}

void BufferBroker::note_staged(int node, const control::BufferReport& report) {
  for (const auto& staged : report.staged_in()) {
    const auto job = jobs_.latest(staged.job());
    if (!job) continue;
    const auto plan = reads_.find({*job, static_cast<int>(staged.phase())});
    if (plan == reads_.end() || plan->second.staged.count(node) ||
        !std::count(plan->second.buffers.begin(), plan->second.buffers.end(), node))
      continue;
    plan->second.failed.insert(staged.failed().begin(), staged.failed().end());
    stage_done(plan->second, *job, plan->first.second, node);
  }
}

void BufferBroker::stage_failed(ReadPlan& plan, JobNumber job, int index, int node) {
  plan.failed.insert(plan.files.begin(), plan.files.end());
  if (!plan.staged.count(node)) stage_done(plan, job, index, node);
}

void BufferBroker::stage_done(ReadPlan& plan, JobNumber job, int index, int node) {
  events_ = true;
  plan.staged.insert(node);
  if (plan.prefetched || plan.staged.size() < plan.buffers.size()) return;
  plan.prefetched = true;
  scheduler_->on_prefetched(job, index, now_);
  mark_job(job);
}

void BufferBroker::node_gone(int node) {
  events_ = true;
  NodeState& state = nodes_.at(static_cast<size_t>(node));
  state.connected = false;
  // Its stage-ins will not finish: their files are read from the PFS.
  for (auto& [key, plan] : reads_)
    if (!plan.staged.count(node) && std::count(plan.buffers.begin(), plan.buffers.end(), node))
      stage_failed(plan, key.first, key.second, node);
  mark_jobs_on(node);
}

void BufferBroker::mark_jobs_on(int node) {
  for (const core::RunningPhase& phase : scheduler_->running())
    if (!phase.prefetch && std::count(phase.buffers.begin(), phase.buffers.end(), node))
      mark_job(phase.request.app);
}

bool BufferBroker::started(JobNumber job) const {
  return scheduler_->recorder().app(job).start >= 0;
}

const core::RunningPhase* BufferBroker::current_grant(JobNumber job) const {
  const BufferPhases& state = jobs_.at(job).buffer;
  return state.open ? scheduler_->running_phase(job, state.phase_index) : nullptr;
}

void BufferBroker::give_up_late_stage_ins() {
  // A node that is alive but never finishes (a hung PFS mount, a stuck copy) must not hold the
  // job's read phase for ever: past the deadline its files are read from the PFS.
  std::vector<std::pair<std::pair<JobNumber, int>, int>> late;
  for (const auto& [key, plan] : reads_) {
    if (plan.prefetched || plan.buffers.empty() || now_ < plan.deadline) continue;
    for (int node : plan.buffers)
      if (!plan.staged.count(node)) late.emplace_back(key, node);
  }
  for (const auto& [key, node] : late) {
    ++nodes_.at(static_cast<size_t>(node)).stage_ins_late;
    stage_failed(reads_.at(key), key.first, key.second, node);
  }
}

bool BufferBroker::time_due(double now) const {
  const double at = std::max(now_, now - origin_);
  if (const auto release = scheduler_->next_release(); release && *release <= at) return true;
  return std::any_of(reads_.begin(), reads_.end(), [&](const auto& entry) {
    const ReadPlan& plan = entry.second;
    return !plan.prefetched && !plan.buffers.empty() && at >= plan.deadline;
  });
}

void BufferBroker::tick(double now) {
  advance(now);
  events_ = false;
  give_up_late_stage_ins();
  scheduler_->on_tick(now_);
  while (!deferred_.empty()) {
    std::vector<std::function<void()>> run;
    run.swap(deferred_);
    for (auto& action : run) action();
    scheduler_->on_tick(now_);
  }
  update_orders();
}

void BufferBroker::admit(core::AppId app) {
  const JobRecord& record = jobs_.at(app);
  mark_job(app);
  if (!record.ended()) submit_announced_read(app, now_);
  if (record.buffer.open) submit_phase(app, now_);
  // Called from inside the policy: a job that left while queued ends right after.
  if (record.ended()) deferred_.push_back([this, app] { scheduler_->on_app_end(app, now_); });
}

void BufferBroker::grant(const core::PhaseRequest& phase,
                         const std::vector<core::BufferId>& buffers) {
  if (config_.on_phase_granted) note_grant_wait(phase);
  if (!jobs_.at(phase.app).buffer.ended_early.count(phase.index)) {
    mark_job(phase.app);
    return;
  }
  // Called from inside the policy's decision: a phase that already ended completes after it.
  const JobNumber job = phase.app;
  const int index = phase.index;
  deferred_.push_back([this, job, index, buffers] {
    JobRecord& ended = jobs_.at(job);
    ended.buffer.ended_early.erase(index);
    complete_phase(job, index, buffers);
    if (ended.ended() && ended.buffer.ended_early.empty()) scheduler_->on_app_end(job, now_);
  });
}

void BufferBroker::note_grant_wait(const core::PhaseRequest& phase) const {
  const auto& phases = scheduler_->recorder().phases();
  for (auto it = phases.rbegin(); it != phases.rend(); ++it)
    if (it->app == phase.app && it->index == phase.index) {
      config_.on_phase_granted(now_ - it->requested);
      return;
    }
}

void BufferBroker::start_drain(core::BufferId buffer) {
  nodes_.at(static_cast<size_t>(buffer)).draining = true;
}

void BufferBroker::stop_drain(core::BufferId buffer) {
  nodes_.at(static_cast<size_t>(buffer)).draining = false;
}

void BufferBroker::start_prefetch(const core::PhaseRequest& phase,
                                  const std::vector<core::BufferId>& buffers) {
  ReadPlan& plan = reads_.at({phase.app, phase.index});
  plan.buffers = buffers;
  if (!buffers.empty())
    plan.deadline = now_ + config_.stage_in_grace +
                    plan.bytes / static_cast<double>(buffers.size()) / config_.stage_in_min_rate;
  for (int b : buffers) {
    mark_node(b);  // its order now lists the stage-in
    // A slot with no node now cannot copy anything: its part is read from the PFS. Reported
    // after the policy's call has returned.
    if (!nodes_[static_cast<size_t>(b)].connected)
      deferred_.push_back([this, app = phase.app, index = phase.index, b] {
        stage_failed(reads_.at({app, index}), app, index, b);
      });
  }
}

void BufferBroker::update_orders() {
  const auto& buffers = scheduler_->buffers();
  std::set<std::pair<JobNumber, int>> held_reads;
  for (size_t b = 0; b < nodes_.size(); ++b) {
    NodeState& node = nodes_[b];
    // Data of jobs the policy does not know (written before this daemon started) drains always.
    std::set<std::string> jobs = node.orphans;
    if (node.draining)
      for (const auto& held : buffers[b].held)
        if (held.drainable) jobs.insert(jobs_.at(held.app).key);
    control::DrainOrder next;
    next.set_drain(!jobs.empty());
    for (const auto& job : jobs) next.add_jobs(job);
    // The copies the policy holds here for read phases (staged in, or being staged in).
    for (const auto& held : buffers[b].held) {
      const auto plan = reads_.find({held.app, held.phase});
      if (!held.clean || plan == reads_.end()) continue;
      held_reads.insert(plan->first);
      const auto& where = plan->second.buffers;
      const auto place = std::find(where.begin(), where.end(), static_cast<int>(b));
      if (place == where.end()) continue;
      auto* stage = next.add_stage_in();
      stage->set_job(jobs_.at(held.app).key);
      stage->set_phase(static_cast<std::uint32_t>(held.phase));
      stage->set_uid(plan->second.uid);
      stage->set_gid(plan->second.gid);
      for (const auto& file : plan->second.files) stage->add_files(file);
      stage->set_stripe_bytes(config_.stripe_bytes);
      stage->set_stripe_index(static_cast<std::uint32_t>(place - where.begin()));
      stage->set_stripe_count(static_cast<std::uint32_t>(where.size()));
    }
    next.set_epoch(node.order.epoch());
    if (next.SerializeAsString() == node.order.SerializeAsString()) continue;
    next.set_epoch(node.order.epoch() + 1);
    node.order = std::move(next);
    mark_node(static_cast<int>(b));
  }
  // A read phase whose copies the policy released (read, or its job ended) is done with.
  for (auto it = reads_.begin(); it != reads_.end();) {
    const JobRecord& job = jobs_.at(it->first.first);
    const BufferPhases& phases = job.buffer;
    const bool reading = phases.open && phases.phase_read && phases.phase_index == it->first.second;
    // A job that ended before its prefetch was placed: the policy dropped it.
    const bool dropped = job.ended() && it->second.buffers.empty();
    if ((it->second.prefetched && !held_reads.count(it->first) && !reading) || dropped)
      it = reads_.erase(it);
    else
      ++it;
  }
}

void BufferBroker::fill_directive(JobNumber job, control::Directive& out) const {
  const JobRecord& record = jobs_.at(job);
  const BufferPhases& state = record.buffer;
  out.set_buffer_mode(true);
  out.set_job(record.key);
  out.set_stripe_bytes(config_.stripe_bytes);
  // A read waits for a stage-in under way, never for one the policy has not placed yet (the PFS
  // holds its bytes; another job may hold the nodes for as long as it runs).
  const auto read = reads_.find({job, state.phase_index});
  const bool unplaced = state.phase_read && (read == reads_.end() || read->second.buffers.empty());
  const core::RunningPhase* grant = current_grant(job);
  out.set_await_grant(state.open && !grant && !unplaced);
  if (!grant) return;
  bool whole = true;
  for (int b : grant->buffers) {
    const NodeState& node = nodes_[static_cast<size_t>(b)];
    if (node.connected) out.add_buffers(node.address);
    whole = whole && node.connected;
  }
  // A read is served by node (offset / stripe) % nodes: with one of them gone the stripes no
  // longer line up, and every file is read from the PFS.
  if (!state.phase_read || !whole) return;
  const ReadPlan& plan = read->second;  // a running read phase's plan is kept (update_orders)
  for (const auto& file : plan.files)
    if (!plan.failed.count(file)) out.add_read_files(file);
}

void BufferBroker::fill_order(int node, control::DrainOrder& out) const {
  out = nodes_.at(static_cast<size_t>(node)).order;
}

void BufferBroker::fill_status(control::Status& out) const {
  out.set_policy(config_.policy);
  const auto& buffers = scheduler_->buffers();
  for (size_t b = 0; b < nodes_.size(); ++b) {
    const NodeState& node = nodes_[b];
    auto* s = out.add_buffers();
    s->set_index(static_cast<std::uint32_t>(b));
    s->set_address(node.address);
    s->set_connected(node.connected);
    s->set_capacity(node.reported ? node.last.capacity()
                                  : static_cast<std::uint64_t>(config_.capacity));
    s->set_used(node.last.used());
    s->set_scheduled_used(buffers[b].used);
    s->set_phases(static_cast<std::uint32_t>(buffers[b].phases));
    s->set_draining(node.draining);
    s->set_queue_depth(node.last.queue_depth());
    s->set_drained_bytes(node.last.drained_bytes());
    s->set_stage_ins_late(node.stage_ins_late);
  }
}

double BufferBroker::wait_seconds(JobNumber job, double now) const {
  now -= origin_;
  // Admission (DataWarp's reservation) first, then each phase's wait for its grant.
  const core::AppRecord& record = scheduler_->recorder().app(job);
  double total = (record.start >= 0 ? record.start : now) - record.arrival;
  for (const auto& phase : scheduler_->recorder().phases())
    if (phase.app == job) total += (phase.granted >= 0 ? phase.granted : now) - phase.requested;
  return total;
}

std::vector<core::AccountingRecord> BufferBroker::accounting(double now,
                                                             double clock_offset) const {
  auto records = core::accounting_records(*scheduler_, config_.pricing,
                                          std::max(now_, now - origin_), origin_ + clock_offset);
  for (size_t j = 0; j < records.size(); ++j) {
    const JobRecord& job = jobs_.at(static_cast<JobNumber>(j));
    records[j].job_id = job.label;
    records[j].ncpus = static_cast<int>(std::min<std::uint32_t>(job.ranks, 1U << 30));
  }
  return records;
}

std::vector<JobNumber> BufferBroker::take_changed_jobs() {
  std::vector<JobNumber> jobs = take_distinct(changed_jobs_);
  std::erase_if(jobs, [this](JobNumber job) { return jobs_.at(job).ended(); });
  return jobs;
}

std::vector<int> BufferBroker::take_changed_nodes() { return take_distinct(changed_nodes_); }

void BufferBroker::complete_phase(JobNumber job, int index, const std::vector<int>& buffers) {
  scheduler_->on_phase_complete(job, index, now_);
  // A new order epoch for its nodes: reports that acknowledge it include all of its writes.
  for (int b : buffers) {
    auto& order = nodes_[static_cast<size_t>(b)].order;
    order.set_epoch(order.epoch() + 1);
    mark_node(b);
  }
}

void BufferBroker::advance(double now) { now_ = std::max(now_, now - origin_); }

void BufferBroker::mark_job(JobNumber job) { changed_jobs_.push_back(job); }
void BufferBroker::mark_node(int node) { changed_nodes_.push_back(node); }

std::string BufferBroker::results_json() const {
  using nlohmann::ordered_json;
  const auto& recorder = scheduler_->recorder();
  const auto apps = recorder.app_metrics();
  const auto s = recorder.system_metrics();
  ordered_json out;
  out["policy"] = config_.policy;
  out["metrics"] = {{"avg_completion", s.avg_completion},
                    {"avg_wait", s.avg_wait},
                    {"avg_io", s.avg_io},
                    {"makespan", s.makespan},
                    {"avg_stall", s.avg_stall},
                    {"fairness", s.fairness},
                    {"buffer_efficiency", s.buffer_efficiency}};
  out["apps"] = ordered_json::array();
  for (size_t a = 0; a < apps.size(); ++a)
    out["apps"].push_back({{"job", jobs_.at(static_cast<JobNumber>(a)).label},
                           {"name", apps[a].name},
                           {"arrival", apps[a].arrival},
                           {"start", apps[a].start},
                           {"end", apps[a].end},
                           {"completion", apps[a].completion},
                           {"wait", apps[a].wait},
                           {"io", apps[a].io},
                           {"bytes", apps[a].bytes}});
  out["phases"] = ordered_json::array();
  for (const auto& p : recorder.phases())
    out["phases"].push_back({{"job", jobs_.at(p.app).label},
                             {"index", p.index},
                             {"op", p.op == core::Op::Read ? "read" : "write"},
                             {"requested", p.requested},
                             {"granted", p.granted},
                             {"end", p.end},
                             {"size", p.bytes}});
  out["drains"] = simkit::drains_json(recorder.drains());
  out["prefetches"] =
      simkit::prefetches_json(recorder.prefetches(), [&](int app) { return jobs_.at(app).label; });
  return out.dump(2) + "\n";
}

}  // namespace harmonia::schedd
