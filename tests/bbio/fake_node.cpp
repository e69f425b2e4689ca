#include "fake_node.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "common/frames.hpp"
#include "control/bb.pb.h"
#include "control/frame.hpp"

namespace harmonia::testing {

FakeNode::FakeNode(std::string pfs_root) : pfs_root_(std::move(pfs_root)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(at);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&at), sizeof(at)) != 0 ||
      listen(listen_fd_, 16) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&at), &length) != 0)
    throw std::runtime_error("fake node: cannot listen on loopback");
  address_ = "127.0.0.1:" + std::to_string(ntohs(at.sin_port));
  std::filesystem::create_directories(pfs_root_ + "/.harmonia/fences/" + address_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeNode::~FakeNode() {
  die();
  acceptor_.join();
  for (auto& thread : threads_) thread.join();
}

void FakeNode::die() {
  if (dead_.exchange(true)) return;
  shutdown(listen_fd_, SHUT_RDWR);
  close(listen_fd_);
  std::lock_guard lock(mutex_);
  for (const int fd : connections_) shutdown(fd, SHUT_RDWR);
}

std::uint64_t FakeNode::held_bytes(ino_t inode) const {
  std::lock_guard lock(mutex_);
  const auto found = held_.find(inode);
  std::uint64_t bytes = 0;
  if (found != held_.end())
    for (const auto& [offset, data] : found->second.pieces) bytes += data.size();
  return bytes;
}

std::vector<std::uint64_t> FakeNode::write_offsets(ino_t inode) const {
  std::lock_guard lock(mutex_);
  const auto found = held_.find(inode);
  return found == held_.end() ? std::vector<std::uint64_t>{} : found->second.offsets;
}

int FakeNode::answered(const std::string& kind) const {
  std::lock_guard lock(mutex_);
  const auto found = answered_.find(kind);
  return found == answered_.end() ? 0 : found->second;
}

void FakeNode::accept_loop() {
  while (!dead_) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // died (the socket is shut down), or a transient error
    std::lock_guard lock(mutex_);
    if (dead_) {
      close(fd);
      break;
    }
    connections_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void FakeNode::serve(int fd) {
  for (;;) {
    std::uint8_t header[control::kHeaderBytes];
    if (!common::receive_all(fd, reinterpret_cast<char*>(header), sizeof(header))) break;
    std::string body(control::frame_length(header), '\0');
    if (!common::receive_all(fd, body.data(), body.size())) break;
    bb::Request request;
    if (!request.ParseFromString(body)) break;
    std::string payload;
    if (request.has_write() && request.write().payload() > 0) {
      payload.resize(request.write().payload());
      if (!common::receive_all(fd, payload.data(), payload.size())) break;
    }
    std::string frame(control::kHeaderBytes, '\0');
    frame += answer(body, payload);
    control::put_header(reinterpret_cast<std::uint8_t*>(frame.data()),
                        static_cast<std::uint32_t>(frame.size() - control::kHeaderBytes));
    if (dead_ || !common::send_all(fd, frame)) break;
  }
  shutdown(fd, SHUT_RDWR);
}

std::string FakeNode::answer(const std::string& body, const std::string& payload) {
  bb::Request request;
  request.ParseFromString(body);
  bb::Response response;
  response.set_seq(request.seq());
  response.set_code(bb::Response::OK);
  std::lock_guard lock(mutex_);
  if (request.has_write()) {
    const bb::Write& write = request.write();
    ++answered_["write"];
    if (full_) {
      response.set_code(bb::Response::FULL);
    } else {
      Held& held = held_[write.inode()];
      held.name = write.file();
      held.pieces[write.offset()] = write.payload() > 0 ? payload : write.data();
      held.offsets.push_back(write.offset());
    }
  } else if (request.has_read()) {
    const bb::Read& read = request.read();
    ++answered_["read"];
    std::string data;
    const auto found = held_.find(read.inode());
    std::uint64_t at = read.offset();
    if (found != held_.end())
      for (const auto& [offset, piece] : found->second.pieces)
        if (offset <= at && at < offset + piece.size() && at < read.offset() + read.length()) {
          const std::uint64_t take =
              std::min<std::uint64_t>(offset + piece.size(), read.offset() + read.length()) - at;
          data += piece.substr(at - offset, take);
          at += take;
        }
    if (at < read.offset() + read.length())
      response.set_code(bb::Response::NOT_HELD);
    else
      response.set_data(data);
  } else if (request.has_drain()) {
    ++answered_["drain"];
    std::string why;
    if (!drain(request.drain().inode(), why)) {
      response.set_code(bb::Response::ERROR);
      response.set_message(why);
    }
  } else if (request.has_publish()) {
    ++answered_["publish"];
    if (!publish_ok_) {
      response.set_code(bb::Response::ERROR);
      response.set_message("this node has no scheduler to tell");
    }
  } else if (request.has_authenticate()) {
    response.set_uid(getuid());
  }
  return response.SerializeAsString();
}

bool FakeNode::drain(ino_t inode, std::string& why) {
  const auto found = held_.find(inode);
  if (found == held_.end()) return true;
  const std::string target = pfs_root_ + "/" + found->second.name;
  const int fd = open(target.c_str(), O_WRONLY | O_CLOEXEC);
  bool ok = fd >= 0;
  for (const auto& [offset, piece] : found->second.pieces)
    ok = ok && pwrite(fd, piece.data(), piece.size(), static_cast<off_t>(offset)) ==
                   static_cast<ssize_t>(piece.size());
  if (fd >= 0) close(fd);
  if (!ok) {
    why = target + ": cannot drain";
    return false;
  }
  held_.erase(found);
  return true;
}

}  // namespace harmonia::testing
