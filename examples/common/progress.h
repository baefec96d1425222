// Progress within an epoch, for the primary rank of the examples: a live bar when stdout is
// a terminal, else a line every `interval` seconds (logs and pipes get no carriage returns).
//
//   examples::EpochProgress progress(group->is_primary(), epoch, epochs, steps, samples_per_step,
//                                    /*interval_s=*/10);
//   for (...) { ...; progress.step(loss.item<double>()); }
//   progress.finish();
#pragma once

#include <chrono>
#include <cstdint>

namespace examples {

class EpochProgress {
 public:
  // enabled: print at all (the primary rank). total_steps: steps in this epoch.
  // samples_per_step: global samples per step (batch size x world size).
  EpochProgress(bool enabled, int64_t epoch, int64_t epochs, int64_t first_step,
                int64_t total_steps, int64_t samples_per_step, double interval_s);
  // After each optimizer step, with this rank's loss of the step.
  void step(double loss);
  // Ends the bar (a newline on a terminal); nothing otherwise.
  void finish();

 private:
  void draw(bool force);

  using Clock = std::chrono::steady_clock;
  bool enabled_;
  bool terminal_;
  int64_t epoch_, epochs_, total_steps_, samples_per_step_;
  int64_t step_;
  int64_t steps_run_ = 0;  // by this process in this epoch (a resumed epoch starts later)
  double loss_sum_ = 0;
  double interval_s_;
  Clock::time_point start_;
  Clock::time_point last_print_;
};

}  // namespace examples
