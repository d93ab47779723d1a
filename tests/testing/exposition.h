#ifndef PACELINE_TESTS_TESTING_EXPOSITION_H_
#define PACELINE_TESTS_TESTING_EXPOSITION_H_

// Reads the Prometheus text format back for assertions: every sample line
// as "name{labels}" -> value, with the labels sorted by name (prometheus-cpp
// writes a family's constant labels first), and every "# TYPE" line as
// name -> type.

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace paceline::testing {

struct Exposition {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;

  // The sample's value, or -1 when absent.
  double Get(const std::string& series) const {
    auto it = samples.find(series);
    return it == samples.end() ? -1 : it->second;
  }
  bool Has(const std::string& series) const { return samples.contains(series); }
};

// "name{b=\"2\",a=\"1\"}" -> "name{a=\"1\",b=\"2\"}".
inline std::string SortLabels(const std::string& series) {
  const size_t open = series.find('{');
  if (open == std::string::npos || series.back() != '}') return series;
  std::vector<std::string> labels;
  std::string current;
  bool quoted = false;
  for (size_t i = open + 1; i + 1 < series.size(); ++i) {
    const char c = series[i];
    if (quoted && c == '\\' && i + 2 < series.size()) {
      current += c;
      current += series[++i];
      continue;
    }
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) {
      labels.push_back(std::move(current));
      current.clear();
      continue;
    }
    current += c;
  }
  if (!current.empty()) labels.push_back(std::move(current));
  std::sort(labels.begin(), labels.end());
  std::string out = series.substr(0, open + 1);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    out += labels[i];
  }
  return out + '}';
}

inline Exposition ParseExposition(const std::string& text) {
  Exposition out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const size_t space = rest.find(' ');
      out.types[rest.substr(0, space)] = rest.substr(space + 1);
      continue;
    }
    if (line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    out.samples[SortLabels(line.substr(0, space))] =
        std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_EXPOSITION_H_
