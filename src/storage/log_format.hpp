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
/// A record of what the program did to the target's name, not of data: its `offset` holds the
/// kind (NameRecord), its data what goes with it.
inline constexpr uint32_t kNameMagic = 0x4d414e48;  // "HNAM"
inline constexpr const char* kLogSuffix = ".hlog";

/// The kinds of name records, so that recovery writes to the file the program wrote, whatever
/// it is called by then, and never brings back one it deleted.
enum class NameRecord : uint64_t {
  Identity = 0,  ///< the target file: device and inode (8 bytes each), then its file handle
  Renamed = 1,   ///< the program renamed it: its new absolute path
  Unlinked = 2,  ///< the program deleted its last name: nothing is replayed
};

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

/// Appends a name record at `at` in the log `fd` (real write calls only); the bytes it took, or
/// 0 on error (errno; the partial record is cut off).
uint64_t append_name_record(int fd, uint64_t at, NameRecord kind, const std::string& data);
/// The data of an Identity record.
std::string identity_data(uint64_t device, uint64_t inode, const std::string& handle);

struct LogScan {
  std::string target;  ///< the header's path, then the latest Renamed record's
  uint64_t records = 0;
  uint64_t bytes = 0;
  bool torn_tail = false;  ///< bytes after the last complete record were ignored
  std::string error;       ///< not a readable log at all (bad header)
  /// From the name records: the target's identity (when the log has one), and whether the
  /// program deleted it.
  bool identified = false;
  uint64_t device = 0, inode = 0;
  std::string handle;
  bool unlinked = false;
};

/// Reads the log in `fd` from the start into `scan` (the target is known before the first record,
/// and follows the name records as they come) and calls `on_record` for every complete data
/// record in order, stopping early if it returns false. Uses only real I/O calls.
void scan_log(int fd, LogScan& scan,
              const std::function<bool(const RecordHeader&, const char* data)>& on_record);

}  // namespace harmonia::storage
