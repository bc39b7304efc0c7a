#include "sim/least_squares.h"

#include <cmath>

namespace ds41::sim {
namespace {

// Solves the normal equations over the columns in `use` (Gaussian elimination with partial
// pivoting); a singular column gets 0.
std::vector<double> Solve(const std::vector<std::vector<double>>& rows, const std::vector<double>& y,
                          const std::vector<bool>& use) {
  const size_t m = use.size();
  std::vector<size_t> cols;
  for (size_t c = 0; c < m; ++c)
    if (use[c]) cols.push_back(c);
  const size_t k = cols.size();
  std::vector<std::vector<double>> a(k, std::vector<double>(k + 1, 0));
  // Columns are scaled to unit norm first: token counts and their squares differ by many orders.
  std::vector<double> scale(k, 0);
  for (size_t j = 0; j < k; ++j) {
    for (const auto& r : rows) scale[j] += r[cols[j]] * r[cols[j]];
    scale[j] = scale[j] > 0 ? 1 / std::sqrt(scale[j]) : 0;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t p = 0; p < k; ++p) {
      const double xp = rows[i][cols[p]] * scale[p];
      for (size_t q = 0; q < k; ++q) a[p][q] += xp * rows[i][cols[q]] * scale[q];
      a[p][k] += xp * y[i];
    }
  }
  for (size_t p = 0; p < k; ++p) {
    size_t best = p;
    for (size_t r = p + 1; r < k; ++r)
      if (std::fabs(a[r][p]) > std::fabs(a[best][p])) best = r;
    std::swap(a[p], a[best]);
    if (std::fabs(a[p][p]) < 1e-12) continue;
    for (size_t r = 0; r < k; ++r) {
      if (r == p) continue;
      const double f = a[r][p] / a[p][p];
      for (size_t q = p; q <= k; ++q) a[r][q] -= f * a[p][q];
    }
  }
  std::vector<double> coef(m, 0);
  for (size_t p = 0; p < k; ++p) coef[cols[p]] = std::fabs(a[p][p]) < 1e-12 ? 0 : a[p][k] / a[p][p] * scale[p];
  return coef;
}

}  // namespace

Fit NonNegativeLeastSquares(const std::vector<std::vector<double>>& rows, const std::vector<double>& y) {
  Fit f;
  if (rows.empty()) return f;
  std::vector<bool> use(rows[0].size(), true);
  for (;;) {
    f.coef = Solve(rows, y, use);
    size_t worst = use.size();
    for (size_t c = 0; c < use.size(); ++c)
      if (use[c] && f.coef[c] < 0 && (worst == use.size() || f.coef[c] < f.coef[worst])) worst = c;
    if (worst == use.size()) break;
    use[worst] = false;
  }
  double ss = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    double e = -y[i];
    for (size_t c = 0; c < f.coef.size(); ++c) e += rows[i][c] * f.coef[c];
    ss += e * e;
  }
  f.rms = std::sqrt(ss / static_cast<double>(rows.size()));
  return f;
}

}  // namespace ds41::sim
