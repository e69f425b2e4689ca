#pragma once
// On-disk staging log (docs/staging-library.md): a header naming the target file, then one
// checksummed record per staged write. Records are only appended, so a crash can tear at most the
// last record, which the checksum exposes; recovery replays every complete record in order.

#include <cstdint>
#include <functional>
#include <string>

namespace harmonia::storage {

inline constexpr char kLogMagic[8] = {'H', 'R', 'M', 'N', 'L', 'O', 'G', '1'};
inline constexpr uint32_t kRecordMagic = 0x43455248;  // "HREC"
inline constexpr const char* kLogSuffix = ".hlog";

struct RecordHeader {
  uint32_t magic = kRecordMagic;
  uint32_t reserved = 0;
  uint64_t offset = 0;    ///< where the data goes in the target file
  uint64_t length = 0;    ///< bytes of data following this header
  uint64_t checksum = 0;  ///< XXH3-64 of the three fields above and the data
};
static_assert(sizeof(RecordHeader) == 32);

/// Bytes of the log header for a target path.
size_t log_header_size(const std::string& target);
/// Writes the log header at the start of `fd` (real write calls only); false on error (errno).
bool write_log_header(int fd, const std::string& target);
/// Checksum of a record's fields and data.
uint64_t record_checksum(const RecordHeader& header, const void* data);

struct LogScan {
  std::string target;
  uint64_t records = 0;
  uint64_t bytes = 0;
  bool torn_tail = false;  ///< bytes after the last complete record were ignored
  std::string error;       ///< not a readable log at all (bad header)
};

/// Reads the log in `fd` from the start into `scan` (the target is known before the first record)
/// and calls `on_record` for every complete record in order, stopping early if it returns false.
/// Uses only real I/O calls.
void scan_log(int fd, LogScan& scan,
              const std::function<bool(const RecordHeader&, const char* data)>& on_record);

}  // namespace harmonia::storage
