#include "core/coordination/coordinator.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace harmonia::core::coordination {

Coordinator::Coordinator(CoordinatorConfig config) : config_(config) {
  if (config_.pfs_servers < 1) throw std::invalid_argument("pfs_servers must be >= 1");
  if (!(config_.window_seconds > 0)) throw std::invalid_argument("window_seconds must be > 0");
}

JobId Coordinator::on_register(const JobInfo& info, double now) {
  if (info.processes < 1) throw std::invalid_argument("job " + info.name + ": processes < 1");
  jobs_.push_back({info, true, false, 0, false, 0, {}});
  changed_.push_back(true);
  const JobId id = static_cast<JobId>(jobs_.size() - 1);
  changed_list_.push_back(id);
  ++membership_version_;
  update(now, id, true);
  return id;
}

namespace {
void check(const std::vector<bool>& known, JobId job) {
  if (job < 0 || static_cast<size_t>(job) >= known.size())
    throw std::out_of_range("unknown job " + std::to_string(job));
}
}  // namespace

void Coordinator::set_competing(JobId job) {
  const auto& j = jobs_[static_cast<size_t>(job)];
  if (j.registered && (j.in_io || j.wants_flush))
    competing_.insert(job);
  else
    competing_.erase(job);
}

void Coordinator::on_unregister(JobId job, double now) {
  check(changed_, job);
  auto& j = jobs_[static_cast<size_t>(job)];
  j.registered = false;
  j.in_io = false;
  j.wants_flush = false;
  set_competing(job);
  not_default_.erase(job);
  if (token_holder_ == job) token_holder_.reset();
  ++membership_version_;
  update(now, job, true);
}

void Coordinator::on_io_begin(JobId job, double now) {
  check(changed_, job);
  auto& j = jobs_[static_cast<size_t>(job)];
  if (!j.registered) throw std::logic_error("I/O phase of an unregistered job");
  if (!j.in_io) {
    j.in_io = true;
    j.io_since = now;
  }
  set_competing(job);
  update(now, job, false);
}

void Coordinator::on_io_end(JobId job, double now) {
  check(changed_, job);
  jobs_[static_cast<size_t>(job)].in_io = false;
  set_competing(job);
  update(now, job, false);
}

void Coordinator::on_flush_request(JobId job, double now) {
  check(changed_, job);
  auto& j = jobs_[static_cast<size_t>(job)];
  if (!j.registered) throw std::logic_error("flush request of an unregistered job");
  if (!j.wants_flush) {
    j.wants_flush = true;
    j.flush_since = now;
  }
  set_competing(job);
  update(now, job, false);
}

void Coordinator::on_flush_done(JobId job, double now) {
  check(changed_, job);
  jobs_[static_cast<size_t>(job)].wants_flush = false;
  set_competing(job);
  if (token_holder_ == job) token_holder_.reset();
  update(now, job, false);
}

void Coordinator::on_tick(double now) { update(now, std::nullopt, false); }

const Directive& Coordinator::directive(JobId job) const {
  check(changed_, job);
  return jobs_[static_cast<size_t>(job)].directive;
}

std::vector<JobId> Coordinator::take_changed() {
  // Only the jobs flagged since the last call: a daemon with 10,000 jobs calls this per event.
  std::vector<JobId> out;
  out.swap(changed_list_);
  std::sort(out.begin(), out.end());
  for (JobId id : out) changed_[static_cast<size_t>(id)] = false;
  return out;
}

void Coordinator::plan(double) {}

std::vector<JobId> Coordinator::in_io_by_start() const {
  std::vector<JobId> out;
  for (JobId id : competing_)
    if (jobs_[static_cast<size_t>(id)].in_io) out.push_back(id);
  std::stable_sort(out.begin(), out.end(), [&](JobId a, JobId b) {
    return jobs_[static_cast<size_t>(a)].io_since < jobs_[static_cast<size_t>(b)].io_since;
  });
  return out;
}

std::vector<std::vector<int>> Coordinator::proportional_split(
    const std::vector<JobId>& jobs) const {
  if (jobs.empty()) return {};
  // Largest-remainder apportionment of the servers by data size, at least one server each:
  // quotas servers x weight / total, their floors (at least 1), then the servers left to the
  // largest remainders (ties: the larger weight, then the earlier job). When there are more jobs
  // than servers, the last jobs share the last server.
  const int servers = config_.pfs_servers;
  const size_t n = jobs.size();
  std::vector<double> weight;
  for (JobId j : jobs) {
    const auto& info = jobs_[static_cast<size_t>(j)].info;
    weight.push_back(std::max(1.0, info.processes * info.bytes_per_process));
  }
  const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  std::vector<double> quota(n);
  std::vector<int> share(n);
  for (size_t k = 0; k < n; ++k) {
    quota[k] = servers * weight[k] / total;
    share[k] = std::max(1, static_cast<int>(std::floor(quota[k])));
  }
  int left = servers - std::accumulate(share.begin(), share.end(), 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double ra = quota[a] - share[a], rb = quota[b] - share[b];
    return ra != rb ? ra > rb : weight[a] > weight[b];
  });
  for (size_t r = 0; left > 0; r = (r + 1) % n, --left) share[order[r]] += 1;
  // Minimums of one server took too many: give back from the largest shares.
  while (left < 0) {
    const auto largest = std::max_element(share.begin(), share.end());
    if (*largest <= 1) break;
    *largest -= 1;
    ++left;
  }
  std::vector<std::vector<int>> out;
  int next = 0;
  for (size_t k = 0; k < n; ++k) {
    std::vector<int> mine;
    for (int s = 0; s < share[k]; ++s) mine.push_back(std::min(next + s, servers - 1));
    next = std::min(next + share[k], servers - 1);
    out.push_back(mine);
  }
  return out;
}

void Coordinator::update(double now, std::optional<JobId> event_job, bool membership_changed) {
  plan(now);
  // The jobs whose directive may change: the competing ones, those that had a directive other
  // than the default (they may have just stopped competing), the job of the event, and everyone
  // when the strategy looks at idle jobs and the membership changed.
  std::set<JobId> candidates = competing_;
  if (membership_changed && depends_on_idle_jobs()) {
    for (size_t i = 0; i < jobs_.size(); ++i) candidates.insert(static_cast<JobId>(i));
  } else {
    candidates.insert(not_default_.begin(), not_default_.end());
    if (event_job) candidates.insert(*event_job);
  }
  std::vector<std::pair<JobId, Directive>> decided;
  for (JobId id : candidates)
    if (jobs_[static_cast<size_t>(id)].registered) decided.emplace_back(id, strategy(id, now));

  // Flush ordering among the jobs competing to flush: those asking, whose strategy lets them
  // (all of them are competing, hence candidates), by id.
  std::vector<JobId> waiting;
  for (const auto& [id, d] : decided)
    if (jobs_[static_cast<size_t>(id)].wants_flush && d.flush_allowed) waiting.push_back(id);
  const bool token_order =
      config_.flush_order == FlushOrder::Token || config_.flush_order == FlushOrder::Priority;
  std::optional<JobId> expired;
  if (token_order && token_holder_ && config_.max_token_seconds > 0 &&
      now - token_since_ > config_.max_token_seconds && waiting.size() > 1) {
    // Held too long while others wait: the holder goes to the back of the line, and does not
    // get the token back this time (not even by priority).
    expired = token_holder_;
    jobs_[static_cast<size_t>(*expired)].flush_since = now;
    token_holder_.reset();
  }
  if (token_order && !token_holder_) {
    // A free token goes to the next waiting job.
    for (JobId id : waiting) {
      if (id == expired) continue;
      if (!token_holder_) {
        token_holder_ = id;
        continue;
      }
      const auto& j = jobs_[static_cast<size_t>(id)];
      const auto& best = jobs_[static_cast<size_t>(*token_holder_)];
      const bool better =
          config_.flush_order == FlushOrder::Priority && j.info.priority != best.info.priority
              ? j.info.priority > best.info.priority
              : j.flush_since < best.flush_since;
      if (better) token_holder_ = id;
    }
    if (token_holder_) token_since_ = now;
  }
  std::optional<JobId> window_owner;
  if (config_.flush_order == FlushOrder::Window && !waiting.empty()) {
    const auto window = static_cast<long long>(std::floor(now / config_.window_seconds));
    window_owner = waiting[static_cast<size_t>(window % static_cast<long long>(waiting.size()))];
  }
  const auto flush_turn = [&](JobId id) {
    if (std::find(waiting.begin(), waiting.end(), id) == waiting.end()) return true;
    switch (config_.flush_order) {
      case FlushOrder::Free:
        return true;
      case FlushOrder::Token:
      case FlushOrder::Priority:
        return token_holder_ == id;
      case FlushOrder::Window:
        return window_owner == id;
    }
    return true;
  };

  for (auto& [id, d] : decided) {
    d.flush_allowed = d.flush_allowed && flush_turn(id);
    auto& job = jobs_[static_cast<size_t>(id)];
    if (!(d == job.directive)) {
      job.directive = d;
      if (!changed_[static_cast<size_t>(id)]) changed_list_.push_back(id);
      changed_[static_cast<size_t>(id)] = true;
    }
    if (d == Directive{})
      not_default_.erase(id);
    else
      not_default_.insert(id);
  }
}

}  // namespace harmonia::core::coordination
