// The report's curation section (profile/report_sections.h).
#include <cstdio>

#include "profile/report_sections.h"

namespace crucible::profile {
namespace {

using nlohmann::json;

std::string mb(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", double(b) / 1e6);
  return buf;
}

std::string td(const std::string& s) { return "<td>" + svg::escape(s) + "</td>"; }

}  // namespace

std::string curation_section(const json& report, const std::string& origin) {
  const json& in = report["input"];
  const json& out = report["output"];
  std::string body = "<p class=\"note\">From " + svg::escape(origin) + ": " +
                     std::to_string(in.value("files", 0)) + " input files, profile " +
                     svg::escape(report["config"].value("profile", std::string("?"))) + ". " +
                     std::to_string(in.value("docs", uint64_t(0))) + " documents (" +
                     mb(in.value("text_bytes", uint64_t(0))) + ") in, " +
                     std::to_string(out.value("docs", uint64_t(0))) + " (" +
                     mb(out.value("text_bytes", uint64_t(0))) + ") kept.";
  for (const auto& st : report["stages"])
    if (st.contains("changed_docs"))
      body += " Clean-up changed the text of " + std::to_string(st.value("changed_docs", uint64_t(0))) +
              " documents.";
  body += "</p>\n";
  // Stage table, in pipeline order.
  body += "<table class=\"grid\"><tr><th>stage</th><th>docs in</th><th>docs out</th><th>removed</th>"
          "<th>bytes in</th><th>bytes out</th></tr>";
  svg::BarChart bars;
  bars.title = "Documents removed per rule";
  bars.y_label = "documents";
  svg::Series docs;
  docs.name = "documents removed";
  json rules_table = json::array();
  for (const auto& st : report["stages"]) {
    const std::string name = st.value("name", std::string());
    if (!st.value("enabled", false)) {
      body += "<tr>" + td(name) + "<td colspan=\"5\">off</td></tr>";
      continue;
    }
    uint64_t din = st.value("docs_in", uint64_t(0)), dout = st.value("docs_out", uint64_t(0));
    body += "<tr>" + td(name) + td(std::to_string(din)) + td(std::to_string(dout)) +
            td(std::to_string(din - dout)) + td(mb(st.value("bytes_in", uint64_t(0)))) +
            td(mb(st.value("bytes_out", uint64_t(0)))) + "</tr>";
    for (const auto& [rule, v] : st["removed"].items()) {
      // Short labels under the bars: the rule without its stage ("min_words"),
      // the stage itself for the dedup stages' single rule.
      std::string label = rule.substr(rule.find('.') + 1);
      if (label == "duplicate") label = name;
      bars.categories.push_back(label);
      docs.y.push_back(double(v.value("docs", uint64_t(0))));
      docs.x.push_back(double(docs.x.size()));
    }
  }
  body += "</table>\n";
  bars.series.push_back(docs);
  bars.width = std::max(760, int(bars.categories.size()) * 95);
  if (!bars.categories.empty()) body += svg::render(bars);
  // Examples, per rule.
  for (const auto& st : report["stages"]) {
    if (!st.contains("examples")) continue;
    for (const auto& [rule, list] : st["examples"].items()) {
      body += "<details><summary>" + svg::escape(rule) + ": " +
              std::to_string(st["removed"].value(rule, json::object()).value("docs", uint64_t(0))) +
              " removed; examples</summary><table class=\"grid\">";
      for (const auto& e : list) {
        std::string what = e.value("source", std::string());
        if (e.contains("value") && e["value"].is_number())
          what += "\nvalue " + svg::format_number(e["value"].get<double>()) + ", limit " +
                  svg::format_number(e.value("threshold", 0.0));
        std::string text = "<pre>" + svg::escape(e.value("text", std::string())) + "</pre>";
        if (e.contains("duplicate_of") && e["duplicate_of"].is_object()) {
          what += "\nsimilarity " + svg::format_number(e.value("similarity", 0.0));
          text += "<p class=\"note\">duplicate of " +
                  svg::escape(e["duplicate_of"].value("source", std::string())) + "</p><pre>" +
                  svg::escape(e["duplicate_of"].value("text", std::string())) + "</pre>";
        }
        body += "<tr><td><pre>" + svg::escape(what) + "</pre></td><td>" + text + "</td></tr>";
      }
      body += "</table></details>\n";
    }
  }
  return html_section("curation", "Data curation", body);
}

}  // namespace crucible::profile
