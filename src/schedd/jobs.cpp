#include "schedd/jobs.hpp"

#include <stdexcept>

namespace harmonia::schedd {

JobNumber JobTable::add(JobRecord record) {
  if (live_.count(record.key)) throw std::logic_error("job " + record.key + " is live already");
  const auto job = static_cast<JobNumber>(records_.size());
  record.live = std::make_unique<LiveJob>();
  records_.push_back(std::move(record));
  // Keyed by a view of the new record's own key, never an older one's.
  const std::string_view key = records_.back().key;
  latest_.erase(key);
  latest_.emplace(key, job);
  live_.emplace(key, job);
  return job;
}

std::optional<JobNumber> JobTable::latest(const std::string& key) const {
  const auto found = latest_.find(key);
  if (found == latest_.end()) return std::nullopt;
  return found->second;
}

std::optional<JobNumber> JobTable::live(const std::string& key) const {
  const auto found = live_.find(key);
  if (found == live_.end()) return std::nullopt;
  return found->second;
}

void JobTable::end(JobNumber job) {
  JobRecord& record = at(job);
  if (record.ended()) return;
  record.live.reset();
  record.buffer.announced.clear();  // what it announced matters no more
  live_.erase(record.key);
  if (keeps_ended_) return;
  if (const auto found = latest_.find(record.key); found != latest_.end() && found->second == job)
    latest_.erase(found);
  for (std::string* text : {&record.key, &record.label, &record.named})
    std::string().swap(*text);  // their memory too
}

std::vector<JobNumber> JobTable::live_by_key() const {
  std::vector<JobNumber> jobs;
  jobs.reserve(live_.size());
  for (const auto& entry : live_) jobs.push_back(entry.second);
  return jobs;
}

}  // namespace harmonia::schedd
