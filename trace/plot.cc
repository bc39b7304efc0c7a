#include "trace/plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

extern char** environ;

namespace ds41 {
namespace {

namespace fs = std::filesystem;

// A gnuplot single-quoted string ('' is a quote inside one).
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The executable: `name` itself when it holds a '/', else the first match on PATH; "" when none.
std::string FindExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const std::string p = (d.empty() ? "." : d) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

Status WriteFile(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  out.close();
  if (!out) return DataLossError("cannot write " + p.string());
  return Status::Ok();
}

// Runs `gnuplot script` in `dir` (the script names its data files relative to it).
Status RunGnuplot(const std::string& gnuplot, const fs::path& dir, const fs::path& script) {
  const std::string cd = "cd " + Quote(dir.string());
  const std::string script_path = script.string();
  const char* argv[] = {gnuplot.c_str(), "-e", cd.c_str(), script_path.c_str(), nullptr};
  pid_t pid;
  if (const int rc = ::posix_spawn(&pid, gnuplot.c_str(), nullptr, nullptr, const_cast<char* const*>(argv), environ);
      rc != 0) {
    return InternalError("cannot start " + gnuplot + ": " + std::strerror(rc));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return InternalError("gnuplot failed on " + script_path);
  return Status::Ok();
}

std::string Preamble(const std::string& png, const std::string& title) {
  return "set terminal pngcairo size 960,600 noenhanced font 'sans,11'\n"
         "set output " + Quote(png) + "\n"
         "set title " + Quote(title) + "\n"
         "set grid\n";
}

// The load sweep's axis: label "policy@load" -> policy, load.
struct SweepPoint {
  std::string policy, load;
  const Summary* summary;
};

}  // namespace

StatusOr<std::vector<std::string>> PlotRuns(const std::vector<PlotRun>& runs, const std::string& dir_name,
                                            const std::string& gnuplot_name) {
  const std::string gnuplot = FindExecutable(gnuplot_name);
  if (gnuplot.empty()) {
    return FailedPreconditionError("gnuplot (" + gnuplot_name +
                                   ") is not installed: apt-get install gnuplot-nox (scripts/setup.sh installs it)");
  }
  if (runs.empty()) return InvalidArgumentError("no runs to plot");
  std::error_code ec;
  fs::create_directories(dir_name, ec);
  if (ec) return InvalidArgumentError("cannot create " + dir_name + ": " + ec.message());
  const fs::path dir = fs::absolute(dir_name);
  std::vector<std::string> pngs;

  // TTFT CDF: one data block per run (gnuplot's "index"), y over all the run's requests.
  {
    std::ostringstream dat, gp;
    gp << Preamble("ttft_cdf.png", "Time to first token (from the scheduled arrival)")
       << "set xlabel 'TTFT (s)'\nset ylabel 'share of all requests'\nset logscale x\nset yrange [0:1]\n"
          "set key bottom right\n";
    std::vector<std::string> curves;
    int block = 0;
    for (const PlotRun& run : runs) {
      std::vector<double> ttft;
      for (const RequestRecord& r : run.records) {
        if (r.ok()) ttft.push_back(std::max(r.ttft_s, 1e-4));  // (log scale)
      }
      if (ttft.empty()) continue;  // nothing to draw: no ok request
      std::sort(ttft.begin(), ttft.end());
      dat << "# " << run.label << "\n";
      for (size_t i = 0; i < ttft.size(); ++i) {
        dat << ttft[i] << " " << static_cast<double>(i + 1) / static_cast<double>(run.records.size()) << "\n";
      }
      dat << "\n\n";
      curves.push_back("'ttft_cdf.dat' index " + std::to_string(block++) + " using 1:2 with steps lw 2 title " +
                       Quote(run.label));
    }
    if (curves.empty()) return FailedPreconditionError("no run has an ok request: nothing to plot");
    gp << "plot ";
    for (size_t i = 0; i < curves.size(); ++i) gp << (i ? ", \\\n     " : "") << curves[i];
    gp << "\n";
    DS41_RETURN_IF_ERROR(WriteFile(dir / "ttft_cdf.dat", dat.str()));
    DS41_RETURN_IF_ERROR(WriteFile(dir / "ttft_cdf.gp", gp.str()));
    DS41_RETURN_IF_ERROR(RunGnuplot(gnuplot, dir, dir / "ttft_cdf.gp"));
    pngs.push_back((dir / "ttft_cdf.png").string());
  }

  // Load sweep, when every label is policy@load.
  std::vector<SweepPoint> points;
  for (const PlotRun& run : runs) {
    const size_t at = run.label.rfind('@');
    if (at == std::string::npos || at == 0 || at + 1 == run.label.size()) return pngs;
    points.push_back({run.label.substr(0, at), run.label.substr(at + 1), &run.summary});
  }
  bool numeric = true;
  std::vector<std::string> load_order;  // categorical axis: loads in order of first appearance
  for (const SweepPoint& p : points) {
    char* end = nullptr;
    std::strtod(p.load.c_str(), &end);
    numeric = numeric && end != p.load.c_str();
    if (std::find(load_order.begin(), load_order.end(), p.load) == load_order.end()) load_order.push_back(p.load);
  }
  auto x_of = [&](const std::string& load) {
    if (numeric) return std::strtod(load.c_str(), nullptr);
    return static_cast<double>(std::find(load_order.begin(), load_order.end(), load) - load_order.begin());
  };
  std::map<std::string, std::vector<const SweepPoint*>> by_policy;
  for (const SweepPoint& p : points) by_policy[p.policy].push_back(&p);
  std::ostringstream dat, xtics;
  dat << "# load mean_ttft_s p99_ttft_s goodput_rps goodput_share\n";
  for (auto& [policy, ps] : by_policy) {
    std::sort(ps.begin(), ps.end(), [&](const SweepPoint* a, const SweepPoint* b) { return x_of(a->load) < x_of(b->load); });
    dat << "# " << policy << "\n";
    for (const SweepPoint* p : ps) {
      dat << x_of(p->load) << " " << p->summary->ttft_mean << " " << p->summary->ttft_p99 << " " << p->summary->goodput_rps
          << " " << p->summary->goodput_share << "\n";
    }
    dat << "\n\n";
  }
  if (numeric) {
    xtics << "set offsets graph 0.05, graph 0.05, 0, 0\n";  // points at the ends stay visible
  } else {
    xtics << "set xtics (";
    for (size_t i = 0; i < load_order.size(); ++i) xtics << (i ? ", " : "") << Quote(load_order[i]) << " " << i;
    xtics << ")\nset xrange [-0.5:" << static_cast<double>(load_order.size()) - 0.5 << "]\n";
  }
  std::ostringstream ttft_gp, good_gp;
  ttft_gp << Preamble("load_ttft.png", "TTFT against offered load: mean (solid) and p99 (dashed)") << xtics.str()
          << "set xlabel 'offered load'\nset ylabel 'TTFT (s)'\nset logscale y\nset key outside right top\nplot ";
  good_gp << Preamble("load_goodput.png", "Goodput against offered load") << xtics.str()
          << "set xlabel 'offered load'\nset ylabel 'requests/s meeting the SLO'\nset yrange [0:*]\nset key outside right top\nplot ";
  int i = 0;
  for (const auto& [policy, ps] : by_policy) {
    const std::string src = "'load_sweep.dat' index " + std::to_string(i) + " using 1:";
    const std::string lt = " lt " + std::to_string(i + 1) + " lw 2 pt 7";
    ttft_gp << (i ? ", \\\n     " : "") << src << "2 with linespoints" << lt << " dt 1 title " << Quote(policy + " mean")
            << ", \\\n     " << src << "3 with linespoints" << lt << " dt 2 title " << Quote(policy + " p99");
    good_gp << (i ? ", \\\n     " : "") << src << "4 with linespoints" << lt << " title " << Quote(policy);
    ++i;
  }
  ttft_gp << "\n";
  good_gp << "\n";
  DS41_RETURN_IF_ERROR(WriteFile(dir / "load_sweep.dat", dat.str()));
  DS41_RETURN_IF_ERROR(WriteFile(dir / "load_ttft.gp", ttft_gp.str()));
  DS41_RETURN_IF_ERROR(WriteFile(dir / "load_goodput.gp", good_gp.str()));
  DS41_RETURN_IF_ERROR(RunGnuplot(gnuplot, dir, dir / "load_ttft.gp"));
  DS41_RETURN_IF_ERROR(RunGnuplot(gnuplot, dir, dir / "load_goodput.gp"));
  pngs.push_back((dir / "load_ttft.png").string());
  pngs.push_back((dir / "load_goodput.png").string());
  return pngs;
}

}  // namespace ds41
