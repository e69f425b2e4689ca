// Fixture: C++ with qualified calls, a range loop and an MPI-IO loop.
#include <cstdio>
#include <vector>

void dump(std::FILE* out, const std::vector<double>& data, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    std::fprintf(out, "round %d\n", r);
    std::fwrite(data.data(), sizeof(double), data.size(), out);
  }
}

void collective(MPI_File fh, const std::vector<std::vector<double>>& blocks) {
  for (const auto& block : blocks) {
    MPI_File_write_all(fh, block.data(), static_cast<int>(block.size()), MPI_DOUBLE, nullptr);
  }
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return s;
}
