// fuserank-server: placeholder until server/server.cc lands (being written now).
#include <cstdio>

int main() {
  std::fprintf(stderr, "fuserank-server: not built yet\n");
  return 1;
}
