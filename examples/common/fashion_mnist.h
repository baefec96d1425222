// Fashion-MNIST for the examples and benchmarks, read with LibTorch's own MNIST dataset.
//
// Debian's dataset-fashion-mnist ships the IDX files gzip-compressed; torch's MNIST reader
// wants them plain. prepare_fashion_mnist() decompresses them once into a cache directory
// (atomically, so concurrent ranks are safe) and returns that directory.
#pragma once

#include <filesystem>
#include <string>

#include <torch/torch.h>

namespace examples {

inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Returns a directory holding the four uncompressed IDX files, decompressing
// `<source>/<name>.gz` into `cache` when needed. Throws std::runtime_error naming the file
// when a source is missing or corrupt.
std::filesystem::path prepare_fashion_mnist(const std::filesystem::path& source,
                                            const std::filesystem::path& cache);

// The training or test split, images normalised with Fashion-MNIST's mean and std;
// `limit` > 0 keeps only the first `limit` samples (quick tests).
struct MnistSplit {
  torch::Tensor images;  // [N, 1, 28, 28] float
  torch::Tensor labels;  // [N] int64
};
MnistSplit load_fashion_mnist(const std::filesystem::path& prepared_dir, bool train,
                              int64_t limit = 0);

// The CNN of the mnist example and the benchmark: two conv blocks with BatchNorm, two
// fully-connected layers. The Python twin is examples/python/mnist.py's Net.
struct MnistCnnImpl : torch::nn::Module {
  MnistCnnImpl();
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(MnistCnn);

}  // namespace examples
