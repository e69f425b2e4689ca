#include "storage/log_format.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "storage/real.hpp"

namespace harmonia::storage {

namespace {

/// Moves all `size` bytes with `io` (the real pread64 or pwrite64), resuming after short
/// transfers and EINTR; false on error or end of file.
template <class Buffer, class Io>
bool transfer_exact(Io io, int fd, Buffer* buffer, size_t size, uint64_t offset) {
  while (size > 0) {
    const ssize_t n = io(fd, buffer, size, static_cast<off64_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

bool read_exact(int fd, void* buffer, size_t size, uint64_t offset) {
  return transfer_exact(real().pread64, fd, static_cast<char*>(buffer), size, offset);
}

bool write_exact(int fd, const void* buffer, size_t size, uint64_t offset) {
  return transfer_exact(real().pwrite64, fd, static_cast<const char*>(buffer), size, offset);
}

}  // namespace

size_t log_header_size(const std::string& target) {
  return sizeof(kLogMagic) + sizeof(uint32_t) + target.size() + sizeof(uint64_t);
}

bool write_log_header(int fd, const std::string& target) {
  std::vector<char> header(log_header_size(target));
  char* p = header.data();
  std::memcpy(p, kLogMagic, sizeof(kLogMagic));
  p += sizeof(kLogMagic);
  const auto length = static_cast<uint32_t>(target.size());
  std::memcpy(p, &length, sizeof(length));
  p += sizeof(length);
  std::memcpy(p, target.data(), target.size());
  p += target.size();
  const uint64_t checksum = XXH3_64bits(header.data(), static_cast<size_t>(p - header.data()));
  std::memcpy(p, &checksum, sizeof(checksum));
  return write_exact(fd, header.data(), header.size(), 0);
}

uint64_t append_name_record(int fd, uint64_t at, NameRecord kind, const std::string& data) {
  RecordHeader header;
  header.magic = kNameMagic;
  header.offset = static_cast<uint64_t>(kind);
  header.length = data.size();
  header.checksum = record_checksum(header, data.data());
  std::vector<char> bytes(sizeof(header) + data.size());
  std::memcpy(bytes.data(), &header, sizeof(header));
  std::memcpy(bytes.data() + sizeof(header), data.data(), data.size());
  if (write_exact(fd, bytes.data(), bytes.size(), at)) return bytes.size();
  const int error = errno;
  (void)real().ftruncate64(fd, static_cast<off64_t>(at));
  errno = error;
  return 0;
}

std::string identity_data(uint64_t device, uint64_t inode, const std::string& handle) {
  std::string data(2 * sizeof(uint64_t), '\0');
  std::memcpy(data.data(), &device, sizeof(device));
  std::memcpy(data.data() + sizeof(device), &inode, sizeof(inode));
  return data + handle;
}

uint64_t record_checksum(const RecordHeader& header, const void* data) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &header.magic, sizeof(header.magic));
  XXH3_64bits_update(&state, &header.offset, sizeof(header.offset));
  XXH3_64bits_update(&state, &header.length, sizeof(header.length));
  XXH3_64bits_update(&state, data, header.length);
  return XXH3_64bits_digest(&state);
}

void scan_log(int fd, LogScan& scan,
              const std::function<bool(const RecordHeader&, const char* data)>& on_record) {
  char magic[sizeof(kLogMagic)];
  uint32_t length = 0;
  if (!read_exact(fd, magic, sizeof(magic), 0) || std::memcmp(magic, kLogMagic, sizeof(magic)) ||
      !read_exact(fd, &length, sizeof(length), sizeof(magic)) || length > 4096) {
    scan.error = "not a libharmonia staging log (bad header)";
    return;
  }
  scan.target.resize(length);
  uint64_t stored = 0;
  const uint64_t path_at = sizeof(magic) + sizeof(length);
  if (!read_exact(fd, scan.target.data(), length, path_at) ||
      !read_exact(fd, &stored, sizeof(stored), path_at + length)) {
    scan.error = "truncated log header";
    return;
  }
  std::vector<char> header(log_header_size(scan.target) - sizeof(stored));
  read_exact(fd, header.data(), header.size(), 0);
  if (XXH3_64bits(header.data(), header.size()) != stored) {
    scan.error = "log header checksum mismatch";
    return;
  }

  uint64_t at = log_header_size(scan.target);
  // A damaged length must not make us allocate more than the log holds.
  struct stat64 st {};
  const uint64_t log_size =
      real().fstat64(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : UINT64_MAX;
  std::vector<char> data;
  while (true) {
    RecordHeader record;
    if (!read_exact(fd, &record, sizeof(record), at)) {
      // A clean end has nothing at all past the last record.
      char probe;
      scan.torn_tail = real().pread64(fd, &probe, 1, static_cast<off64_t>(at)) == 1;
      break;
    }
    if ((record.magic != kRecordMagic && record.magic != kNameMagic) ||
        record.length > log_size - at - sizeof(record)) {
      scan.torn_tail = true;
      break;
    }
    data.resize(record.length);
    if (!read_exact(fd, data.data(), record.length, at + sizeof(record)) ||
        record_checksum(record, data.data()) != record.checksum) {
      scan.torn_tail = true;
      break;
    }
    at += sizeof(record) + record.length;
    if (record.magic == kNameMagic) {
      switch (static_cast<NameRecord>(record.offset)) {
        case NameRecord::Identity:
          if (record.length < 2 * sizeof(uint64_t)) break;
          scan.identified = true;
          std::memcpy(&scan.device, data.data(), sizeof(scan.device));
          std::memcpy(&scan.inode, data.data() + sizeof(scan.device), sizeof(scan.inode));
          scan.handle.assign(data.data() + 2 * sizeof(uint64_t),
                             record.length - 2 * sizeof(uint64_t));
          break;
        case NameRecord::Renamed:
          if (record.length > 0 && record.length <= 4096)
            scan.target.assign(data.data(), record.length);
          break;
        case NameRecord::Unlinked:
          scan.unlinked = true;
          break;
      }
      continue;
    }
    ++scan.records;
    scan.bytes += record.length;
    if (!on_record(record, data.data())) break;
  }
}

}  // namespace harmonia::storage
