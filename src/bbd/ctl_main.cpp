// harmonia-bbctl: put, get, drain and status against a harmonia-bbd (docs/buffer-nodes.md).
#include <google/protobuf/util/json_util.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "bbd/bb.pb.h"
#include "common/frames.hpp"
#include "common/tcp.hpp"
#include "control/frame.hpp"

namespace bb = harmonia::bb;
namespace control = harmonia::control;

namespace {

bb::Response call(int fd, bb::Request request) {
  static std::uint64_t seq = 0;
  request.set_seq(++seq);
  std::string frame;
  harmonia::common::append_frame(frame, request);
  if (!harmonia::common::send_all(fd, frame))
    throw std::runtime_error("the node closed the connection");
  std::vector<std::uint8_t> input;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const auto scan = control::scan_frame(input.data(), input.size(), 128UL << 20);
    if (scan.kind == control::FrameScan::Kind::Frame) {
      bb::Response response;
      if (!response.ParseFromArray(input.data() + control::kHeaderBytes,
                                   static_cast<int>(scan.body_length)))
        throw std::runtime_error("malformed response");
      return response;
    }
    if (scan.kind == control::FrameScan::Kind::TooLarge) throw std::runtime_error("huge response");
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) throw std::runtime_error("the node closed the connection");
    input.insert(input.end(), chunk, chunk + n);
  }
}

int report(const bb::Response& response) {
  if (response.code() == bb::Response::OK) return 0;
  std::fprintf(stderr, "harmonia-bbctl: %s: %s\n", bb::Response::Code_Name(response.code()).c_str(),
               response.message().c_str());
  return response.code() == bb::Response::FULL ? 3 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Talk to a harmonia-bbd buffer node"};
  std::string address, file, local;
  std::uint64_t offset = 0, length = 0, chunk = 1 << 20;
  cli.add_option("--node", address, "HOST:PORT")->required();
  auto* put =
      cli.add_subcommand("put", "Write a local file's bytes into FILE at OFFSET, in chunks");
  put->add_option("file", file)->required();
  put->add_option("local", local)->required();
  put->add_option("--offset", offset);
  put->add_option("--chunk", chunk)->check(CLI::Range(1UL, 16UL << 20));
  auto* get = cli.add_subcommand("get", "Read a held range to stdout");
  get->add_option("file", file)->required();
  get->add_option("offset", offset)->required();
  get->add_option("length", length)->required();
  auto* drain = cli.add_subcommand("drain", "Drain FILE (or everything) to the PFS, and wait");
  drain->add_option("file", file);
  auto* status = cli.add_subcommand("status", "The node's state, as JSON");
  cli.require_subcommand(1);
  CLI11_PARSE(cli, argc, argv);
  try {
    const int fd = harmonia::common::connect_tcp(address, "--node");
    if (*put) {
      std::ifstream in(local, std::ios::binary);
      if (!in) throw std::runtime_error(local + ": cannot read");
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // Prints how many bytes the node acknowledged (from the start, in order), whatever happens.
      std::uint64_t acknowledged = 0;
      int rc = 0;
      const auto started = std::chrono::steady_clock::now();
      try {
        for (std::uint64_t at = 0; at < data.size() && rc == 0; at += chunk) {
          bb::Request request;
          auto* w = request.mutable_write();
          w->set_file(file);
          w->set_offset(offset + at);
          w->set_data(data.substr(at, chunk));
          rc = report(call(fd, request));
          if (rc == 0) acknowledged += w->data().size();
        }
      } catch (const std::exception& error) {
        std::fprintf(stderr, "harmonia-bbctl: %s\n", error.what());
        rc = 1;
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::printf("{\"acknowledged\": %llu, \"seconds\": %.6f}\n",
                  static_cast<unsigned long long>(acknowledged), seconds);
      return rc;
    }
    bb::Request request;
    if (*get) {
      auto* r = request.mutable_read();
      r->set_file(file);
      r->set_offset(offset);
      r->set_length(length);
      const bb::Response response = call(fd, request);
      if (const int rc = report(response); rc != 0) return rc;
      std::fwrite(response.data().data(), 1, response.data().size(), stdout);
      return 0;
    }
    if (*drain) {
      request.mutable_drain()->set_file(file);
      return report(call(fd, request));
    }
    if (*status) {
      request.mutable_status();
      const bb::Response response = call(fd, request);
      std::string text;
      google::protobuf::util::JsonPrintOptions options;
      options.always_print_primitive_fields = true;
      options.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(response.status(), &text, options);
      std::cout << text << "\n";
      return report(response);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "harmonia-bbctl: %s\n", error.what());
    return 1;
  }
  return 0;
}
