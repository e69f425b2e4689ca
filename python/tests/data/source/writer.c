/* Fixture for source-mode phase detection: two I/O loops (one nested), one compute loop. */
#include <stdio.h>
#include <unistd.h>

static double field[1024];

void compute(int steps) {
  for (int s = 0; s < steps; ++s)
    for (int i = 0; i < 1024; ++i) field[i] += s * 0.5;
}

void checkpoint(const char* path, int steps) {
  FILE* out = fopen(path, "w");
  for (int s = 0; s < steps; ++s) {
    compute(1);
    for (int k = 0; k < 4; ++k) fwrite(field, sizeof(double), 256, out);
  }
  fclose(out);
}

int restart(int fd) {
  int total = 0;
  while (read(fd, field, sizeof field) > 0) total++;
  return total;
}

void log_once(int fd, int cond) {
  if (cond)
    for (int i = 0; i < 2; ++i) write(fd, "x", 1);
}
