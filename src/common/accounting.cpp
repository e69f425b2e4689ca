#include "common/accounting.hpp"

#include <iomanip>
#include <sstream>

#include "common/write_atomically.hpp"

namespace harmonia::common {

namespace {

const char* const kColumns[] = {
    "JobID",    "JobName",     "User",       "Account",          "QOS",
    "Submit",   "Start",       "End",        "Elapsed",          "ElapsedRaw",
    "State",    "NNodes",      "NCPUS",      "WriteBytes",       "ReadBytes",
    "IOTime",   "StallTime",   "IOSlowdown", "PromisedSlowdown", "BilledNodeHours",
    "Refunded", "UsageFactor", "Charge",     "BoundBroken"};

std::string quoted(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string number(double x, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << x;
  return s.str();
}

/// sacct prints "Unknown" for a time not reached yet.
std::string time_field(double t) { return t < 0 ? "Unknown" : number(t, 3); }

nlohmann::ordered_json time_value(double t) {
  return t < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(t);
}

}  // namespace

nlohmann::ordered_json accounting_json(const std::vector<core::AccountingRecord>& records) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& r : records)
    out.push_back({{"JobID", r.job_id},
                   {"JobName", r.job_name},
                   {"User", r.user},
                   {"Account", r.account},
                   {"QOS", r.qos},
                   {"Submit", time_value(r.submit)},
                   {"Start", time_value(r.start)},
                   {"End", time_value(r.end)},
                   {"Elapsed", core::format_elapsed(r.elapsed)},
                   {"ElapsedRaw", r.elapsed},
                   {"State", r.state},
                   {"NNodes", r.nnodes},
                   {"NCPUS", r.ncpus},
                   {"WriteBytes", r.bytes_written},
                   {"ReadBytes", r.bytes_read},
                   {"IOTime", r.io_time},
                   {"StallTime", r.stall_time},
                   {"IOSlowdown", r.slowdown},
                   {"PromisedSlowdown", r.promised_slowdown},
                   {"BilledNodeHours", r.billed_node_hours},
                   {"Refunded", r.refunded_seconds},
                   {"UsageFactor", r.usage_factor},
                   {"Charge", r.charge},
                   {"BoundBroken", r.bound_broken}});
  return out;
}

std::string accounting_csv(const std::vector<core::AccountingRecord>& records) {
  std::string out;
  for (const char* column : kColumns) out += std::string(out.empty() ? "" : ",") + column;
  out += "\n";
  for (const auto& r : records) {
    const std::string fields[] = {quoted(r.job_id),
                                  quoted(r.job_name),
                                  quoted(r.user),
                                  quoted(r.account),
                                  quoted(r.qos),
                                  time_field(r.submit),
                                  time_field(r.start),
                                  time_field(r.end),
                                  core::format_elapsed(r.elapsed),
                                  number(r.elapsed, 3),
                                  r.state,
                                  std::to_string(r.nnodes),
                                  std::to_string(r.ncpus),
                                  number(r.bytes_written, 0),
                                  number(r.bytes_read, 0),
                                  number(r.io_time, 3),
                                  number(r.stall_time, 3),
                                  number(r.slowdown, 4),
                                  number(r.promised_slowdown, 4),
                                  number(r.billed_node_hours, 6),
                                  number(r.refunded_seconds, 3),
                                  number(r.usage_factor, 4),
                                  number(r.charge, 6),
                                  r.bound_broken ? "yes" : "no"};
    bool first = true;
    for (const auto& f : fields) {
      out += (first ? "" : ",") + f;
      first = false;
    }
    out += "\n";
  }
  return out;
}

void write_accounting(const std::string& prefix,
                      const std::vector<core::AccountingRecord>& records) {
  const std::string json_path = prefix + ".json";
  const std::string csv_path = prefix + ".csv";
  const auto csv = accounting_csv(records);
  write_atomically(json_path, accounting_json(records).dump(2));
  // write_atomically ends the text with a newline: the CSV's own last one is dropped for it.
  write_atomically(csv_path, csv.substr(0, csv.size() - 1));
}

}  // namespace harmonia::common
