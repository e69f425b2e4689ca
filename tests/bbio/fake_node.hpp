#pragma once
// A buffer node in the test's own process, for driving libharmonia's StagedFile without
// LD_PRELOAD or a harmonia-bbd: it speaks the node's protocol (src/control/bb.proto) on a
// loopback port, keeps what it is sent in memory, drains it to the PFS root when asked, and can
// refuse writes as full or die.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace harmonia::testing {

class FakeNode {
 public:
  /// Listens on 127.0.0.1 and marks `pfs_root` as where it drains (ROOT/.harmonia/fences/ADDRESS,
  /// as every node does at start; clients check it before writing to a node).
  explicit FakeNode(std::string pfs_root);
  ~FakeNode();
  FakeNode(const FakeNode&) = delete;
  FakeNode& operator=(const FakeNode&) = delete;

  /// HOST:PORT, as a directive names the node.
  const std::string& address() const { return address_; }
  /// From now on, answer every write FULL (the node has no room), or take them again.
  void refuse_writes_as_full(bool full) { full_ = full; }
  /// From now on, answer a Publish OK (a node with a scheduler) or ERROR (one without).
  void publish_succeeds(bool ok) { publish_ok_ = ok; }
  /// The node dies: it stops listening and drops every connection, holding what it held.
  void die();

  /// Bytes of the file with `inode` the node holds now (written, not drained).
  std::uint64_t held_bytes(ino_t inode) const;
  /// The offsets of the writes of `inode` it took, in the order they came.
  std::vector<std::uint64_t> write_offsets(ino_t inode) const;
  /// How many requests of each kind it answered: "write", "read", "drain", "publish".
  int answered(const std::string& kind) const;

 private:
  struct Held {
    std::string name;                             ///< relative to the PFS root, as written
    std::map<std::uint64_t, std::string> pieces;  ///< by offset; later writes replace
    std::vector<std::uint64_t> offsets;           ///< every write's, in order
  };
  void accept_loop();
  void serve(int fd);
  /// The reply (a serialized Response) to one request; `payload` is a write's raw bytes.
  std::string answer(const std::string& request, const std::string& payload);
  bool drain(ino_t inode, std::string& why);

  std::string pfs_root_;
  std::string address_;
  int listen_fd_ = -1;
  std::atomic<bool> full_{false}, publish_ok_{false}, dead_{false};
  mutable std::mutex mutex_;
  std::map<ino_t, Held> held_;
  std::map<std::string, int> answered_;
  std::vector<int> connections_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace harmonia::testing
