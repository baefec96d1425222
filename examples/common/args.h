// A tiny "--name value" command-line reader for the examples (no dependency to install).
#pragma once

#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

namespace examples {

class Args {
 public:
  Args(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string key = argv[i];
      if (key.rfind("--", 0) != 0 || i + 1 >= argc) {
        std::cerr << "expected --name value pairs, got '" << key << "'\n";
        std::exit(2);
      }
      values_[key.substr(2)] = argv[++i];
    }
  }
  std::string str(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  long num(const std::string& name, long fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : std::stol(it->second);
  }
  double real(const std::string& name, double fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : std::stod(it->second);
  }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace examples
