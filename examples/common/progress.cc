#include "examples/common/progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace examples {
namespace {

constexpr int kBarWidth = 30;
constexpr double kRedrawSeconds = 0.2;  // a terminal bar needs no more

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

EpochProgress::EpochProgress(bool enabled, int64_t epoch, int64_t epochs, int64_t first_step,
                             int64_t total_steps, int64_t samples_per_step, double interval_s)
    : enabled_(enabled),
      terminal_(::isatty(STDOUT_FILENO) == 1),
      epoch_(epoch),
      epochs_(epochs),
      total_steps_(total_steps),
      samples_per_step_(samples_per_step),
      step_(first_step),
      interval_s_(interval_s),
      start_(Clock::now()),
      last_print_(start_) {}

void EpochProgress::step(double loss) {
  ++step_;
  ++steps_run_;
  loss_sum_ += loss;
  draw(false);
}

void EpochProgress::finish() {
  if (!enabled_ || !terminal_) return;
  draw(true);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void EpochProgress::draw(bool force) {
  if (!enabled_) return;
  const auto now = Clock::now();
  const double since_print = seconds_between(last_print_, now);
  if (!force && since_print < (terminal_ ? kRedrawSeconds : interval_s_)) return;
  last_print_ = now;
  const double elapsed = seconds_between(start_, now);
  const double rate = elapsed > 0 ? steps_run_ * samples_per_step_ / elapsed : 0;
  const double loss = steps_run_ > 0 ? loss_sum_ / steps_run_ : 0;
  if (terminal_) {
    const double done = total_steps_ > 0 ? double(step_) / total_steps_ : 1;
    const int filled = static_cast<int>(done * kBarWidth);
    std::string bar(static_cast<std::size_t>(filled), '=');
    if (filled < kBarWidth) bar += '>' + std::string(kBarWidth - filled - 1, ' ');
    const double eta = rate > 0 ? (total_steps_ - step_) * samples_per_step_ / rate : 0;
    std::printf("\repoch %lld/%lld [%s] %3.0f%% %lld/%lld  %.0f samples/s  loss %.4f  eta %.0fs ",
                static_cast<long long>(epoch_ + 1), static_cast<long long>(epochs_), bar.c_str(),
                done * 100, static_cast<long long>(step_), static_cast<long long>(total_steps_),
                rate, loss, eta);
  } else {
    std::printf("epoch %lld/%lld  step %lld/%lld  %.0f samples/s  running loss %.4f\n",
                static_cast<long long>(epoch_ + 1), static_cast<long long>(epochs_),
                static_cast<long long>(step_), static_cast<long long>(total_steps_), rate, loss);
  }
  std::fflush(stdout);
}

}  // namespace examples
