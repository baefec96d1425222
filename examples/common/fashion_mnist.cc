#include "examples/common/fashion_mnist.h"

#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include <zlib.h>

namespace examples {
namespace fs = std::filesystem;

namespace {

const char* kFiles[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

void gunzip(const fs::path& from, const fs::path& to) {
  gzFile in = gzopen(from.c_str(), "rb");
  if (in == nullptr) throw std::runtime_error("cannot open " + from.string());
  // Write next to the target and rename: a rank reading the cache never sees half a file.
  const fs::path temp = to.string() + ".tmp" + std::to_string(::getpid());
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(in, buffer, sizeof buffer)) > 0) out.write(buffer, n);
  int error = 0;
  const char* message = gzerror(in, &error);
  gzclose(in);
  out.close();
  if (n < 0 || error != Z_OK || !out) {
    fs::remove(temp);
    throw std::runtime_error("cannot decompress " + from.string() + ": " + message);
  }
  fs::rename(temp, to);
}

}  // namespace

fs::path prepare_fashion_mnist(const fs::path& source, const fs::path& cache) {
  fs::create_directories(cache);
  for (const char* name : kFiles) {
    const fs::path target = cache / name;
    if (fs::exists(target)) continue;
    const fs::path plain = source / name;
    if (fs::exists(plain)) {
      fs::copy_file(plain, target, fs::copy_options::skip_existing);
      continue;
    }
    const fs::path gz = source / (std::string(name) + ".gz");
    if (!fs::exists(gz)) {
      throw std::runtime_error("Fashion-MNIST file " + gz.string() +
                               " not found: install Debian's dataset-fashion-mnist or pass --data");
    }
    gunzip(gz, target);
  }
  return cache;
}

MnistSplit load_fashion_mnist(const fs::path& prepared_dir, bool train, int64_t limit) {
  using torch::data::datasets::MNIST;
  MNIST dataset(prepared_dir.string(), train ? MNIST::Mode::kTrain : MNIST::Mode::kTest);
  MnistSplit split{dataset.images(), dataset.targets()};
  if (limit > 0 && limit < split.images.size(0)) {
    split.images = split.images.narrow(0, 0, limit);
    split.labels = split.labels.narrow(0, 0, limit);
  }
  // Fashion-MNIST's pixel mean and standard deviation (after scaling to [0, 1]). In place:
  // out-of-place arithmetic would hold three copies of the 188 MB training set at once, and
  // that transient would be the process's peak RSS for the whole run.
  split.images.sub_(0.2860).div_(0.3530);
  split.images = split.images.contiguous();
  split.labels = split.labels.to(torch::kLong).contiguous();
  return split;
}

MnistCnnImpl::MnistCnnImpl()
    : conv1(register_module("conv1",
                            torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)))),
      conv2(register_module("conv2",
                            torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)))),
      bn1(register_module("bn1", torch::nn::BatchNorm2d(32))),
      bn2(register_module("bn2", torch::nn::BatchNorm2d(64))),
      fc1(register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128))),
      fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}

torch::Tensor MnistCnnImpl::forward(torch::Tensor x) {
  x = torch::max_pool2d(torch::relu(bn1(conv1(x))), 2);
  x = torch::max_pool2d(torch::relu(bn2(conv2(x))), 2);
  x = torch::relu(fc1(x.flatten(1)));
  return fc2(x);
}

}  // namespace examples
