#include "schedd/jobs.hpp"

#include <stdexcept>

namespace harmonia::schedd {

JobNumber JobTable::add(JobRecord record) {
  if (live_.count(record.key)) throw std::logic_error("job " + record.key + " is live already");
  const auto job = static_cast<JobNumber>(records_.size());
  latest_[record.key] = job;
  live_[record.key] = job;
  record.ended = false;
  records_.push_back(std::move(record));
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
  if (record.ended) return;
  record.ended = true;
  record.processes = {};
  record.buffer.announced = {};  // what it announced matters no more
  live_.erase(record.key);
}

std::vector<JobNumber> JobTable::live_by_key() const {
  std::vector<JobNumber> jobs;
  jobs.reserve(live_.size());
  for (const auto& entry : live_) jobs.push_back(entry.second);
  return jobs;
}

}  // namespace harmonia::schedd
