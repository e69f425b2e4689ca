#pragma once
/// @file The one writer of accounting records (core/accounting.hpp), shared by harmonia-sim and
/// harmonia-schedd: JSON (a list of records, times in seconds) and CSV (sacct's column names
/// first, Harmonia's after). The columns are documented in docs/accounting.md.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/accounting.hpp"

namespace harmonia::common {

nlohmann::ordered_json accounting_json(const std::vector<core::AccountingRecord>& records);
/// A header line, then one line per record (RFC 4180 quoting where a field needs it).
std::string accounting_csv(const std::vector<core::AccountingRecord>& records);
/// Writes `<prefix>.json` and `<prefix>.csv`, each whole or not at all. Throws
/// std::runtime_error naming the file.
void write_accounting(const std::string& prefix,
                      const std::vector<core::AccountingRecord>& records);

}  // namespace harmonia::common
