// Writes of one file into a buffer node's store by one thread and by several at once, without
// the network: what the store alone lets writers of one shared file do side by side.
//
//   store_bench [--mib 512] [--rounds 5] [--threads 2] [--device DIR]
//
// Each round, in alternating order: one thread writes MIB MiB into one file, 4 MiB a write;
// then THREADS threads write as many bytes into one file, each every THREADS-th 4 MiB block
// (the strided pattern of ranks writing one shared file). The device directory (default
// /dev/shm, standing in for a node-local NVMe) is emptied between runs. Prints GB/s of each
// and the per-round ratio, medians and ranges over the rounds.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bbd/store.hpp"

namespace fs = std::filesystem;
using harmonia::bbd::Status;
using harmonia::bbd::Store;

namespace {

constexpr std::uint64_t kBlock = 4 << 20;

/// GB/s of `writers` threads writing `data.size()` bytes of one file, block by block.
double one_file(const fs::path& root, const std::string& data, unsigned writers) {
  fs::remove_all(root);
  fs::create_directories(root / "device");
  fs::create_directories(root / "pfs");
  double seconds = 0;
  {
    Store store((root / "device").string(), (root / "pfs").string(), 2 * data.size());
    const auto started = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (unsigned k = 0; k < writers; ++k)
      threads.emplace_back([&, k] {
        std::string why;
        for (std::uint64_t at = k * kBlock; at < data.size(); at += writers * kBlock) {
          const std::uint64_t n = std::min(kBlock, data.size() - at);
          if (store.write("shared", at, std::string_view(data).substr(at, n), "", why) !=
              Status::Ok) {
            std::fprintf(stderr, "store_bench: a write failed: %s\n", why.c_str());
            std::exit(1);
          }
        }
      });
    for (auto& thread : threads) thread.join();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  fs::remove_all(root);
  return static_cast<double>(data.size()) / seconds / 1e9;
}

std::string spread(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f (%.2f-%.2f)", values[values.size() / 2], values.front(),
                values.back());
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t mib = 512;
  int rounds = 5;
  unsigned threads = 2;
  std::string device = "/dev/shm";
  for (int k = 1; k + 1 < argc; k += 2) {
    const std::string option = argv[k];
    if (option == "--mib")
      mib = std::strtoull(argv[k + 1], nullptr, 10);
    else if (option == "--rounds")
      rounds = std::atoi(argv[k + 1]);
    else if (option == "--threads")
      threads = static_cast<unsigned>(std::atoi(argv[k + 1]));
    else if (option == "--device")
      device = argv[k + 1];
    else {
      std::fprintf(stderr, "store_bench: unknown option %s\n", option.c_str());
      return 2;
    }
  }
  if (mib == 0 || rounds <= 0 || threads < 2 || (argc - 1) % 2 != 0) {
    std::fprintf(stderr,
                 "usage: store_bench [--mib N>0] [--rounds N>0] [--threads N>=2] [--device DIR]\n");
    return 2;
  }
  std::string data(mib << 20, '\0');
  std::mt19937_64 random(1);
  for (std::size_t at = 0; at + 8 <= data.size(); at += 8) {
    const std::uint64_t word = random();
    std::memcpy(data.data() + at, &word, 8);
  }
  const fs::path root = fs::path(device) / ("harmonia-store-bench-" + std::to_string(getpid()));
  one_file(root, data, 1);  // discarded: the first touch of the memory
  std::vector<double> one, many, ratio;
  for (int round = 0; round < rounds; ++round) {
    double alone = 0, together = 0;
    if (round % 2 == 0) {
      alone = one_file(root, data, 1);
      together = one_file(root, data, threads);
    } else {
      together = one_file(root, data, threads);
      alone = one_file(root, data, 1);
    }
    one.push_back(alone);
    many.push_back(together);
    ratio.push_back(together / alone);
    std::fprintf(stderr, "round %d/%d: one writer %.2f GB/s, %u writers %.2f GB/s\n", round + 1,
                 rounds, alone, threads, together);
  }
  std::printf("| %llu MiB into one file, 4 MiB writes | GB/s, median (min-max) of %d rounds |\n",
              static_cast<unsigned long long>(mib), rounds);
  std::printf("| --- | --- |\n");
  std::printf("| one writer | %s |\n", spread(one).c_str());
  std::printf("| %u writers at once | %s |\n", threads, spread(many).c_str());
  std::printf("| %u writers / one, per round | %s |\n", threads, spread(ratio).c_str());
  return 0;
}
