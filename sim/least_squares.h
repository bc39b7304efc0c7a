// Least squares with non-negative coefficients, small and dense: what the calibration fits rates
// with (a handful of columns, tens of rows). A column whose unconstrained coefficient comes out
// negative is dropped (its coefficient 0) and the rest refitted, until all are >= 0 — a rate can
// not be negative, and a term the data cannot see is better 0 than a compensating negative.
#pragma once

#include <vector>

namespace ds41::sim {

struct Fit {
  std::vector<double> coef;  // one per column
  double rms = 0;            // root mean square residual
};

// rows[i] · coef ≈ y[i]. REQUIRES: every row has the same number of columns; rows.size() == y.size().
Fit NonNegativeLeastSquares(const std::vector<std::vector<double>>& rows, const std::vector<double>& y);

}  // namespace ds41::sim
