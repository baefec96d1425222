// A test's own directory: a fresh one under $TMPDIR (or /tmp), removed with its contents when
// the object goes, also when the test failed.
#pragma once

#include <string>

namespace ddprun::testing {

class TempDir {
 public:
  // Throws std::system_error when no directory can be made (a broken environment).
  TempDir();
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&&) = delete;
  TempDir(const TempDir&) = delete;
  ~TempDir();

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ddprun::testing
