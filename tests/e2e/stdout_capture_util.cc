#include "tests/e2e/stdout_capture_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

namespace fuserank::testing {

StdoutCapture::StdoutCapture(std::string path) : path_(std::move(path)) {
  std::fflush(stdout);
  saved_ = ::dup(1);
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 1);
  ::close(fd);
}

std::string StdoutCapture::Text() const {
  std::ifstream in(path_);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string StdoutCapture::Stop() {
  if (saved_ < 0) return Text();
  std::fflush(stdout);
  ::dup2(saved_, 1);
  ::close(saved_);
  saved_ = -1;
  const std::string text = Text();
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return text;
}

std::string LineWith(const std::string& text, const std::string& marker) {
  const size_t at = text.find(marker);
  if (at == std::string::npos) return "";
  const size_t newline = text.rfind('\n', at);
  const size_t begin = newline == std::string::npos ? 0 : newline + 1;
  const size_t end = text.find('\n', at);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

std::vector<std::string> LinesFrom(const std::string& text, const std::string& marker) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(marker);
    if (at != std::string::npos) lines.push_back(line.substr(at));
  }
  return lines;
}

}  // namespace fuserank::testing
