#include "io/memory_info.hpp"

#include <fstream>
#include <limits>
#include <string>

namespace noeira::io {

double memory_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.starts_with("MemAvailable:")) return std::stod(line.substr(13)) * 1024.0;  // kB
  }
  return std::numeric_limits<double>::max();
}

}  // namespace noeira::io
