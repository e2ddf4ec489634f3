// A main for compilers without libFuzzer (g++): runs LLVMFuzzerTestOneInput once on each file named
// on the command line, or on each file of a named directory, as a libFuzzer binary does with files.
#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int run_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot read\n", path.c_str());
    return 1;
  }
  std::vector<char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "Running: %s\n", path.c_str());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(buf.data()), buf.size());
  return 0;
}

int main(int argc, char** argv) {
  int bad = 0, n = 0;
  for (int a = 1; a < argc; ++a) {
    std::string p = argv[a];
    if (!p.empty() && p[0] == '-') continue;  // libFuzzer flags: ignored here
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR* d = ::opendir(p.c_str());
      std::vector<std::string> names;
      while (dirent* e = d ? ::readdir(d) : nullptr)
        if (e->d_name[0] != '.') names.push_back(p + "/" + e->d_name);
      if (d) ::closedir(d);
      for (auto& f : names) bad += run_file(f), ++n;
    } else {
      bad += run_file(p), ++n;
    }
  }
  std::fprintf(stderr, "replayed %d inputs\n", n);
  return bad ? 1 : 0;
}
