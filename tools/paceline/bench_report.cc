#include "tools/paceline/bench_report.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "tools/paceline/cli.h"

namespace paceline::tools::bench {
namespace {

std::string Ms(double seconds) {
  return absl::StrFormat("%.1f", seconds * 1e3);
}

// "closed-c4" / "closed-t4" / "open-r2.5": a run's name in file names and
// plot keys.
std::string RunTag(const RunResult& run) {
  if (run.open_loop) return absl::StrFormat("open-r%g", run.level);
  if (run.per_tenant) return absl::StrFormat("closed-t%g", run.level);
  return absl::StrFormat("closed-c%g", run.level);
}

// One latency row: "  TTFT      p50 p90 p99 mean | p50 p90 p99 mean".
std::string LatencyRow(absl::string_view name, const Distribution* computed,
                       const Distribution& delivered) {
  const auto cells = [](const Distribution* d) {
    if (d == nullptr || d->count == 0) {
      return absl::StrFormat("%9s %9s %9s %9s", "-", "-", "-", "-");
    }
    return absl::StrFormat("%9s %9s %9s %9s", Ms(d->p50), Ms(d->p90),
                           Ms(d->p99), Ms(d->mean));
  };
  return absl::StrFormat("  %-6s %s | %s\n", name, cells(computed),
                         cells(&delivered));
}

std::string LatencyBlock(absl::string_view who, const GroupStats& g) {
  std::string out = absl::StrFormat("  %-6s %39s | %s\n", who,
                                    "computed (server timings), ms",
                                    "delivered (client receive times), ms");
  absl::StrAppend(&out, absl::StrFormat("  %-6s %9s %9s %9s %9s | %9s %9s %9s "
                                        "%9s\n",
                                        "", "p50", "p90", "p99", "mean", "p50",
                                        "p90", "p99", "mean"));
  absl::StrAppend(&out, LatencyRow("TTFT", &g.ttft_computed, g.ttft_delivered));
  absl::StrAppend(&out, LatencyRow("TPOT", &g.tpot_computed, g.tpot_delivered));
  absl::StrAppend(&out, LatencyRow("ITL", nullptr, g.itl_delivered));
  absl::StrAppend(&out, LatencyRow("E2E", &g.e2e_computed, g.e2e_delivered));
  absl::StrAppend(&out, LatencyRow("queue", &g.queue_computed, Distribution{}));
  return out;
}

std::string ThroughputRow(absl::string_view who, const GroupStats& g) {
  return absl::StrFormat(
      "  %-12s %6d %6d %6d %9.2f %11.1f %11.1f %9.2f %9.2f\n", who, g.requests,
      g.ok, g.failed, g.request_throughput, g.output_throughput,
      g.total_throughput, g.goodput_computed, g.goodput_delivered);
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

std::string JsonDistribution(const Distribution& d) {
  return absl::StrFormat(
      "{\"count\": %d, \"mean\": %s, \"p50\": %s, \"p90\": %s, \"p99\": %s, "
      "\"max\": %s}",
      d.count, JsonNumber(d.mean * 1e3), JsonNumber(d.p50 * 1e3),
      JsonNumber(d.p90 * 1e3), JsonNumber(d.p99 * 1e3),
      JsonNumber(d.max * 1e3));
}

std::string JsonGroup(const GroupStats& g) {
  return absl::StrCat(
      "{\"requests\": ", g.requests, ", \"ok\": ", g.ok,
      ", \"failed\": ", g.failed, ", \"prompt_tokens\": ", g.prompt_tokens,
      ", \"completion_tokens\": ", g.completion_tokens,
      ", \"completion_tokens_from_chunks\": ", g.tokens_from_chunks,
      ", \"request_throughput\": ", JsonNumber(g.request_throughput),
      ", \"output_throughput\": ", JsonNumber(g.output_throughput),
      ", \"total_throughput\": ", JsonNumber(g.total_throughput),
      ", \"goodput\": {\"computed\": ", JsonNumber(g.goodput_computed),
      ", \"delivered\": ", JsonNumber(g.goodput_delivered), "}",
      ", \"computed_ms\": {\"ttft\": ", JsonDistribution(g.ttft_computed),
      ", \"tpot\": ", JsonDistribution(g.tpot_computed),
      ", \"e2e\": ", JsonDistribution(g.e2e_computed),
      ", \"queue\": ", JsonDistribution(g.queue_computed), "}",
      ", \"delivered_ms\": {\"ttft\": ", JsonDistribution(g.ttft_delivered),
      ", \"tpot\": ", JsonDistribution(g.tpot_delivered),
      ", \"itl\": ", JsonDistribution(g.itl_delivered),
      ", \"e2e\": ", JsonDistribution(g.e2e_delivered), "}",
      g.first_error.empty()
          ? std::string()
          : absl::StrCat(", \"first_error\": ", JsonQuote(g.first_error)),
      "}");
}

// Each tenant's service over the common window, or why there is none.
std::string ServiceBlock(const BenchSetup& setup, const RunResult& run) {
  if (!run.window) {
    return "  fair share: no common window (some tenant got no token)\n";
  }
  std::string out = absl::StrFormat(
      "  fair share over the common window %.2f-%.2f s (every tenant "
      "backlogged):\n  %-12s %9s %11s %9s %9s %9s\n",
      run.window->from, run.window->to, "tenant", "tokens", "tok/s", "share",
      "expected", "ratio");
  for (size_t t = 0; t < run.service.size(); ++t) {
    const TenantService& s = run.service[t];
    absl::StrAppend(
        &out, absl::StrFormat("  %-12s %9d %11.1f %8.2f%% %8.2f%% %9.3f\n",
                              setup.tenants[t], s.tokens, s.tokens_per_s,
                              s.share * 100, s.expected * 100, s.ratio));
  }
  return out;
}

std::string JsonService(const BenchSetup& setup, const RunResult& run) {
  if (!run.window) return ", \"fair_share\": null";
  std::string out = absl::StrCat(
      ", \"fair_share\": {\"window_s\": [", JsonNumber(run.window->from), ", ",
      JsonNumber(run.window->to), "], \"tenants\": {");
  for (size_t t = 0; t < run.service.size(); ++t) {
    const TenantService& s = run.service[t];
    absl::StrAppend(&out, t > 0 ? ", " : "", JsonQuote(setup.tenants[t]),
                    ": {\"tokens\": ", s.tokens,
                    ", \"tokens_per_s\": ", JsonNumber(s.tokens_per_s),
                    ", \"share\": ", JsonNumber(s.share),
                    ", \"expected\": ", JsonNumber(s.expected),
                    ", \"ratio\": ", JsonNumber(s.ratio), "}");
  }
  absl::StrAppend(&out, "}}");
  return out;
}

std::string JsonOptionalMs(const std::optional<double>& s) {
  return s ? JsonNumber(*s * 1e3) : "null";
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The first executable `name` in $PATH, or "".
std::string FindOnPath(absl::string_view name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Runs `gnuplot script` in `dir`, its output to this process's stderr.
absl::Status RunGnuplot(const std::string& gnuplot, const std::string& dir,
                        const std::string& script) {
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(127);
    execl(gnuplot.c_str(), "gnuplot", script.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waitpid failed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat(gnuplot, " ", script, " in ", dir, " failed"));
  }
  return absl::OkStatus();
}

struct Metric {
  absl::string_view name;  // file-name part
  absl::string_view title;
  // The per-request values of a side; null when the side has none.
  std::vector<double> (*computed)(const std::vector<RequestRecord>&);
  std::vector<double> (*delivered)(const std::vector<RequestRecord>&);
};

template <std::optional<double> RequestRecord::*kField>
std::vector<double> Values(const std::vector<RequestRecord>& records) {
  std::vector<double> out;
  for (const RequestRecord& r : records) {
    if (r.ok && r.*kField) out.push_back(*(r.*kField));
  }
  return out;
}

std::vector<double> ItlValues(const std::vector<RequestRecord>& records) {
  std::vector<double> out;
  for (const RequestRecord& r : records) {
    if (r.ok)
      out.insert(out.end(), r.itl_delivered.begin(), r.itl_delivered.end());
  }
  return out;
}

constexpr Metric kMetrics[] = {
    {"ttft", "time to first token", Values<&RequestRecord::ttft_computed>,
     Values<&RequestRecord::ttft_delivered>},
    {"tpot", "time per output token (per request)",
     Values<&RequestRecord::tpot_computed>,
     Values<&RequestRecord::tpot_delivered>},
    {"itl", "inter-token latency (delivered)", nullptr, ItlValues},
    {"e2e", "end-to-end latency", Values<&RequestRecord::e2e_computed>,
     Values<&RequestRecord::e2e_delivered>},
};

// "value_ms fraction" lines of the empirical CDF; "" for no values.
std::string CdfData(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StrAppend(&out,
                    absl::StrFormat("%.4f %.6f\n", values[i] * 1e3,
                                    static_cast<double>(i + 1) /
                                        static_cast<double>(values.size())));
  }
  return out;
}

}  // namespace

std::string RunLabel(const RunResult& run) {
  if (run.open_loop) return absl::StrFormat("open, %g req/s", run.level);
  if (run.per_tenant)
    return absl::StrFormat("closed, %g per tenant", run.level);
  return absl::StrFormat("closed, concurrency %g", run.level);
}

std::string FormatTable(const BenchSetup& setup,
                        const std::vector<RunResult>& runs) {
  std::string out = absl::StrFormat(
      "paceline bench: %s%s, model %s; prompt %s tokens, output %s tokens, "
      "pace %s\n",
      setup.server, setup.api == "openai" ? " (OpenAI API)" : "", setup.model,
      setup.prompt_tokens, setup.max_tokens,
      setup.pace > 0 ? absl::StrFormat("%g tok/s", setup.pace) : "off");
  if (setup.api == "openai") {
    absl::StrAppend(&out,
                    "The OpenAI API carries no server timings: the computed "
                    "side stays empty.\n");
  }
  if (setup.slo.any()) {
    std::vector<std::string> parts;
    if (setup.slo.ttft)
      parts.push_back(absl::StrCat("TTFT <= ", Ms(*setup.slo.ttft), " ms"));
    if (setup.slo.tpot)
      parts.push_back(absl::StrCat("TPOT <= ", Ms(*setup.slo.tpot), " ms"));
    if (setup.slo.e2e)
      parts.push_back(absl::StrCat("E2E <= ", Ms(*setup.slo.e2e), " ms"));
    absl::StrAppend(&out, "SLO (goodput): ", absl::StrJoin(parts, ", "), "\n");
  }
  for (const RunResult& run : runs) {
    absl::StrAppend(&out, "\n", RunLabel(run),
                    absl::StrFormat(": %.2f s\n", run.duration));
    absl::StrAppend(
        &out,
        absl::StrFormat("  %-12s %6s %6s %6s %9s %11s %11s %9s %9s\n", "tenant",
                        "reqs", "ok", "failed", "req/s", "out tok/s",
                        "all tok/s", "good c/s", "good d/s"));
    absl::StrAppend(&out, ThroughputRow("(all)", run.all));
    if (run.tenants.size() > 1) {
      for (size_t t = 0; t < run.tenants.size(); ++t) {
        absl::StrAppend(&out, ThroughputRow(setup.tenants[t], run.tenants[t]));
      }
    }
    absl::StrAppend(&out, LatencyBlock("(all)", run.all));
    if (run.tenants.size() > 1) {
      for (size_t t = 0; t < run.tenants.size(); ++t) {
        absl::StrAppend(&out, LatencyBlock(setup.tenants[t], run.tenants[t]));
      }
    }
    if (run.per_tenant) absl::StrAppend(&out, ServiceBlock(setup, run));
    if (run.all.tokens_from_chunks > 0) {
      absl::StrAppend(&out, "  ", run.all.tokens_from_chunks,
                      " requests came without a usage chunk: their completion "
                      "tokens are their text chunks\n");
    }
    if (!run.all.first_error.empty()) {
      absl::StrAppend(&out, "  first error: ", run.all.first_error, "\n");
    }
  }
  absl::StrAppend(&out,
                  "\nPercentiles interpolate linearly between closest ranks. "
                  "TPOT is per request\n(generation span / (tokens - 1)); "
                  "ITL counts each delivered token, tokens of one\nDelta "
                  "arriving together (gap 0).\n");
  return out;
}

std::string FormatJson(const BenchSetup& setup,
                       const std::vector<RunResult>& runs) {
  std::vector<std::string> tenants;
  for (const std::string& t : setup.tenants) tenants.push_back(JsonQuote(t));
  std::string out =
      absl::StrCat("{\"api\": ", JsonQuote(setup.api),
                   ", \"server\": ", JsonQuote(setup.server),
                   ", \"model\": ", JsonQuote(setup.model), ", \"tenants\": [",
                   absl::StrJoin(tenants, ", "), "]",
                   ", \"prompt_tokens\": ", JsonQuote(setup.prompt_tokens),
                   ", \"max_tokens\": ", JsonQuote(setup.max_tokens),
                   ", \"pace\": ", JsonNumber(setup.pace),
                   ", \"burstiness\": ", JsonNumber(setup.burstiness),
                   ", \"seed\": ", setup.seed, ", \"warmup\": ", setup.warmup,
                   ", \"slo_ms\": {\"ttft\": ", JsonOptionalMs(setup.slo.ttft),
                   ", \"tpot\": ", JsonOptionalMs(setup.slo.tpot),
                   ", \"e2e\": ", JsonOptionalMs(setup.slo.e2e), "}",
                   ", \"percentile_method\": \"linear\", \"runs\": [");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& run = runs[i];
    absl::StrAppend(&out, i > 0 ? ", " : "",
                    "{\"mode\": ", run.open_loop ? "\"open\"" : "\"closed\"",
                    run.open_loop    ? ", \"rate\": "
                    : run.per_tenant ? ", \"per_tenant_concurrency\": "
                                     : ", \"concurrency\": ",
                    JsonNumber(run.level),
                    ", \"duration_s\": ", JsonNumber(run.duration),
                    ", \"all\": ", JsonGroup(run.all), ", \"tenants\": {");
    for (size_t t = 0; t < run.tenants.size(); ++t) {
      absl::StrAppend(&out, t > 0 ? ", " : "", JsonQuote(setup.tenants[t]),
                      ": ", JsonGroup(run.tenants[t]));
    }
    absl::StrAppend(&out, "}", run.per_tenant ? JsonService(setup, run) : "",
                    "}");
  }
  absl::StrAppend(&out, "]}\n");
  return out;
}

absl::Status WritePlots(const std::string& dir, const BenchSetup& setup,
                        const std::vector<RunResult>& runs, std::string* note) {
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  std::string script =
      "# Written by `paceline bench --plot`; run `gnuplot plots.gp` here.\n"
      "set terminal pngcairo size 1000,650 noenhanced\n"
      "set grid\nset key bottom right\n";
  const std::string subtitle =
      absl::StrFormat("%s, prompt %s, output %s tokens", setup.model,
                      setup.prompt_tokens, setup.max_tokens);
  for (const Metric& m : kMetrics) {
    std::vector<std::string> curves;
    for (size_t k = 0; k < runs.size(); ++k) {
      const RunResult& run = runs[k];
      for (const bool delivered : {false, true}) {
        const auto values_of = delivered ? m.delivered : m.computed;
        if (values_of == nullptr) continue;
        const std::string data = CdfData(values_of(run.records));
        if (data.empty()) continue;
        const std::string file =
            absl::StrCat("cdf_", RunTag(run), "_", m.name, "_",
                         delivered ? "delivered" : "computed", ".dat");
        RETURN_IF_ERROR(WriteFile(absl::StrCat(dir, "/", file), data));
        curves.push_back(absl::StrFormat(
            "'%s' using 1:2 with lines lw 2 lc %d %s title '%s %s'", file,
            k + 1, delivered ? "dt 1" : "dt 2", RunTag(run),
            delivered ? "delivered" : "computed"));
      }
    }
    if (curves.empty()) continue;
    absl::StrAppend(
        &script, "set output '", m.name, "_cdf.png'\n", "set title '", m.title,
        " — ", subtitle, "'\n", "set xlabel 'ms'\nset ylabel 'fraction'\n",
        "set yrange [0:1]\nplot ", absl::StrJoin(curves, ", \\\n  "), "\n");
  }
  std::string tput =
      "# level request_throughput output_throughput goodput_delivered "
      "ttft_p50_ms ttft_p99_ms\n";
  for (const RunResult& run : runs) {
    absl::StrAppend(
        &tput, absl::StrFormat(
                   "%g %.4f %.2f %.4f %.2f %.2f\n", run.level,
                   run.all.request_throughput, run.all.output_throughput,
                   run.all.goodput_delivered, run.all.ttft_delivered.p50 * 1e3,
                   run.all.ttft_delivered.p99 * 1e3));
  }
  RETURN_IF_ERROR(WriteFile(absl::StrCat(dir, "/throughput.dat"), tput));
  const bool open = !runs.empty() && runs.front().open_loop;
  absl::StrAppend(
      &script, "set output 'throughput.png'\n", "set title 'throughput vs ",
      open ? "offered rate" : "concurrency", " — ", subtitle, "'\n",
      "set xlabel '", open ? "offered requests/s" : "concurrent streams", "'\n",
      "set autoscale y\nset ylabel 'output tokens/s'\n"
      "set y2label 'requests/s'\nset y2tics\nset ytics nomirror\n"
      "set key top left\n",
      "plot 'throughput.dat' using 1:3 axes x1y1 with linespoints lw 2 "
      "title 'output tokens/s', \\\n  'throughput.dat' using 1:2 axes x1y2 "
      "with linespoints lw 2 dt 2 title 'requests/s'\n");
  RETURN_IF_ERROR(WriteFile(absl::StrCat(dir, "/plots.gp"), script));

  const std::string gnuplot = FindOnPath("gnuplot");
  if (gnuplot.empty()) {
    *note = absl::StrCat("wrote data and plots.gp to ", dir,
                         "; gnuplot is not on PATH, so no PNGs (install "
                         "gnuplot-nox, then run `gnuplot plots.gp` there)");
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(RunGnuplot(gnuplot, dir, "plots.gp"));
  *note = absl::StrCat("wrote plots to ", dir);
  return absl::OkStatus();
}

}  // namespace paceline::tools::bench
