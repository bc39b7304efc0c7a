// Figures of replay (or simulator) runs, drawn by gnuplot (Debian: gnuplot-nox) as PNGs that
// docs/benchmarks.md can embed. Each figure's data (.dat) and script (.gp) stay beside its PNG, so
// it can be drawn again or restyled by hand.
//
//   ttft_cdf.png      TTFT CDF, one curve per run (legend: the run's label); y is the share of all
//                     of the run's requests, so rejected, failed and timed-out ones keep a curve
//                     below 1.
//   load_ttft.png     when labels are "policy@load": TTFT mean (solid) and p99 (dashed) against
//   load_goodput.png  the load, and goodput (requests/s meeting the SLO), one curve per policy.
//                     The load is the number after '@' when every label has one (e.g. cost@90,
//                     rr@2.5), else the labels' order with the text as tick labels.
#pragma once

#include <string>
#include <vector>

#include "trace/request_record.h"
#include "trace/summary.h"
#include "util/status.h"

namespace ds41 {

struct PlotRun {
  std::string label;
  std::vector<RequestRecord> records;
  Summary summary;
};

// Draws the figures into `dir` (created if missing); returns the PNG paths written.
// FailedPrecondition when gnuplot is not found (naming the package), Internal when it fails.
StatusOr<std::vector<std::string>> PlotRuns(const std::vector<PlotRun>& runs, const std::string& dir,
                                            const std::string& gnuplot = "gnuplot");

}  // namespace ds41
