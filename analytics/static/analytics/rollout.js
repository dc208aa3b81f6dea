/*
 * The rollout view (/analytics/rollouts/<id>/): reads GET /api/analytics/rollouts/<id>?slices=N with the page's
 * session and draws one Apache ECharts line chart per guard metric (candidate and control), the stage changes
 * and the plan's end as vertical lines, the sample sizes per cohort, and the decision log. Every figure is also
 * written as text with data-* attributes. No framework, no build step.
 *
 * When everything is drawn, #content-main gets data-state="ready" and data-query=<the query string used>;
 * on a failure data-state="error" and #analytics-error says what went wrong.
 */
(function () {
  "use strict";

  var escapeHtml = window.AnalyticsDom.escapeHtml;
  var byId = window.AnalyticsDom.byId;
  var el = window.AnalyticsDom.el;

  var root = document.getElementById("content-main");
  var form = document.getElementById("rollout-slices");
  if (!root || !form) {
    return;
  }

  var API = root.dataset.apiUrl;
  var COHORTS = ["candidate", "control"];
  var COHORT_LABELS = { candidate: "Candidate", control: "Control" };
  var COHORT_COLOURS = { candidate: "#d9822b", control: "#2b6cb0" };
  // How a plan ended, as a line across every chart.
  var END_COLOURS = { rollback: "#c62828", abort: "#757575", complete: "#2e7d32" };
  var STAGE_COLOUR = "#8e8e8e";
  var VERDICT_MARK = { true: "✗", false: "✓" };

  var charts = {};

  // --- formatting --------------------------------------------------------------------------------------

  var integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  var decimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 });

  function isNumber(value) {
    return typeof value === "number" && isFinite(value);
  }

  function formatCount(value) {
    return isNumber(value) ? integer.format(value) : "–";
  }

  function formatValue(metric, value) {
    if (!isNumber(value)) {
      return "–";
    }
    if (metric.kind === "rate") {
      return decimal.format(value * 100) + " %";
    }
    if (metric.kind === "latency") {
      return integer.format(value) + " ms";
    }
    return decimal.format(value);
  }

  function formatWhen(iso) {
    // "2026-11-20T14:03:05.123+00:00" -> "2026-11-20 14:03:05" (the API speaks UTC, and so does the page)
    return typeof iso === "string" ? iso.replace("T", " ").slice(0, 19) : "–";
  }

  // --- small DOM helpers ------------------------------------------------------------------------------

  function setFigure(id, value, text) {
    var node = byId(id);
    node.textContent = text;
    node.setAttribute("data-value", isNumber(value) ? String(value) : "");
  }

  function fillRows(table, rows, emptyText) {
    var tbody = table.tBodies[0];
    if (!rows.length) {
      var columns = table.tHead.rows[0].cells.length;
      tbody.replaceChildren(el("tr", { className: "analytics-empty" }, [el("td", { colspan: columns, text: emptyText })]));
      return;
    }
    tbody.replaceChildren.apply(tbody, rows);
  }

  function numCell(value, text) {
    return el("td", { className: "num", "data-value": isNumber(value) ? value : "" }, [text]);
  }

  // --- charts -------------------------------------------------------------------------------------------

  function darkTheme() {
    var theme = document.documentElement.dataset.theme;
    if (theme === "dark" || theme === "light") {
      return theme === "dark";
    }
    return Boolean(window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
  }

  function chartShow(node, option) {
    option.backgroundColor = "transparent";
    option.textStyle = { fontFamily: "inherit" };
    var id = node.id;
    if (!charts[id]) {
      charts[id] = window.echarts.init(node, darkTheme() ? "dark" : null, { renderer: "canvas" });
      // "finished": drawn, animations included; what a screenshot or a test waits for.
      charts[id].on("finished", function () {
        node.setAttribute("data-rendered", "true");
      });
    }
    node.setAttribute("data-rendered", "false");
    charts[id].setOption(option, true);
  }

  // The middle of each slice: where its point stands on the time axis.
  function middles(points) {
    return points.map(function (point) {
      return (Date.parse(point.start) + Date.parse(point.end)) / 2;
    });
  }

  // Stage changes (each labelled with its share) and the plan's end (rollback red, abort grey, completion green).
  function markers(data) {
    var lines = data.stages.map(function (stage, index) {
      return {
        name: "stage",
        xAxis: Date.parse(stage.at),
        lineStyle: { color: STAGE_COLOUR, type: "dashed" },
        label: { formatter: (index ? "→ " : "") + stage.percentage + " %", position: "insideEndTop" },
      };
    });
    var ending = data.decisions.filter(function (decision) {
      return END_COLOURS[decision.action];
    })[0];
    if (ending) {
      lines.push({
        name: ending.action,
        // The plan's own end (the decision's row is written a moment later, past the span's last slice).
        xAxis: Date.parse(data.plan.finished_at || ending.at),
        lineStyle: { color: END_COLOURS[ending.action], type: "solid", width: 2 },
        label: { formatter: ending.action_label, position: "insideEndBottom", color: END_COLOURS[ending.action] },
      });
    }
    return lines;
  }

  // The span, widened to take in every marked moment (a stage begun or a decision written at its very edge).
  function axisBounds(data, marks) {
    var min = Date.parse(data.series.start);
    var max = Date.parse(data.series.end);
    marks.forEach(function (mark) {
      min = Math.min(min, mark.xAxis);
      max = Math.max(max, mark.xAxis);
    });
    return { min: min, max: max };
  }

  function lineSeries(cohort, values, at, marks) {
    var series = {
      name: COHORT_LABELS[cohort],
      type: "line",
      showSymbol: true,
      symbolSize: 6,
      connectNulls: false,
      itemStyle: { color: COHORT_COLOURS[cohort] },
      lineStyle: { color: COHORT_COLOURS[cohort] },
      data: values.map(function (value, index) {
        return [at[index], isNumber(value) ? value : null];
      }),
    };
    if (marks) {
      series.markLine = { silent: true, symbol: ["none", "none"], animation: false, data: marks };
    }
    return series;
  }

  function drawMetric(container, metric, data, at, marks) {
    var points = data.series.points;
    var id = "chart-" + metric.name;
    var guarded = Boolean(metric.limit); // in words: "at most 25 % worse than the control"
    var sampled = points.some(function (point) {
      return COHORTS.some(function (cohort) {
        return isNumber(point[cohort].values[metric.name]);
      });
    });
    var note =
      (metric.worse === "higher" ? "higher is worse" : "lower is worse") +
      (guarded ? "; guarded: " + metric.limit : "; not guarded by this plan") +
      (sampled ? "" : "; no sample in the span");
    var panel = el("section", { className: "analytics-panel rollout-metric", id: "panel-" + metric.name, "data-metric": metric.name }, [
      el("h2", { title: metric.description }, [metric.label + " ", el("span", { className: "analytics-unit", text: "(" + note + ")" })]),
      el("div", { className: "analytics-chart rollout-chart", id: id, role: "img", "aria-label": metric.label + " per cohort over time" }),
    ]);
    var table = el("table", { className: "rollout-values", id: "table-" + metric.name }, [
      el("thead", {}, [
        el("tr", {}, [
          el("th", { scope: "col", text: "Slice from (UTC)" }),
          el("th", { scope: "col", className: "num", text: "Candidate" }),
          el("th", { scope: "col", className: "num", text: "n" }),
          el("th", { scope: "col", className: "num", text: "Control" }),
          el("th", { scope: "col", className: "num", text: "n" }),
        ]),
      ]),
      el("tbody"),
    ]);
    panel.appendChild(el("details", { className: "rollout-values-details" }, [el("summary", { text: "Figures" }), table]));
    container.appendChild(panel);
    fillRows(
      table,
      points.map(function (point) {
        var cells = [el("td", { text: formatWhen(point.start) })];
        COHORTS.forEach(function (cohort) {
          var value = point[cohort].values[metric.name];
          var sample = point[cohort].samples[metric.name];
          cells.push(numCell(value, formatValue(metric, value)));
          cells.push(numCell(sample, formatCount(sample)));
        });
        return el(
          "tr",
          {
            "data-start": point.start,
            "data-candidate": isNumber(point.candidate.values[metric.name]) ? point.candidate.values[metric.name] : "",
            "data-control": isNumber(point.control.values[metric.name]) ? point.control.values[metric.name] : "",
          },
          cells,
        );
      }),
      "No slices",
    );
    var bounds = axisBounds(data, marks);
    chartShow(byId(id), {
      tooltip: {
        trigger: "axis",
        formatter: function (params) {
          var lines = [escapeHtml(formatWhen(new Date(params[0].value[0]).toISOString()))];
          params.forEach(function (param) {
            lines.push(escapeHtml(param.seriesName) + ": " + escapeHtml(formatValue(metric, param.value[1])));
          });
          return lines.join("<br>");
        },
      },
      legend: { top: 0 },
      grid: { left: 56, right: 24, top: 36, bottom: 32 },
      xAxis: { type: "time", min: bounds.min, max: bounds.max },
      yAxis: {
        type: "value",
        scale: metric.kind !== "rate",
        axisLabel: {
          formatter: function (value) {
            return formatValue(metric, value);
          },
        },
      },
      series: COHORTS.map(function (cohort, index) {
        return lineSeries(
          cohort,
          points.map(function (point) {
            return point[cohort].values[metric.name];
          }),
          at,
          index === 0 ? marks : null,
        );
      }),
    });
  }

  function drawSamples(data, at, marks) {
    var points = data.series.points;
    var totals = {};
    COHORTS.forEach(function (cohort) {
      totals[cohort] = { conversations: 0, turns: 0 };
      points.forEach(function (point) {
        totals[cohort].conversations += point[cohort].conversations;
        totals[cohort].turns += point[cohort].turns;
      });
      setFigure("sample-" + cohort, totals[cohort].conversations, formatCount(totals[cohort].conversations));
      setFigure("sample-" + cohort + "-turns", totals[cohort].turns, formatCount(totals[cohort].turns));
    });
    fillRows(
      byId("table-samples"),
      points.map(function (point) {
        return el(
          "tr",
          {
            "data-start": point.start,
            "data-candidate": point.candidate.conversations,
            "data-control": point.control.conversations,
          },
          [
            el("td", { text: formatWhen(point.start) }),
            numCell(point.candidate.conversations, formatCount(point.candidate.conversations)),
            numCell(point.candidate.turns, formatCount(point.candidate.turns)),
            numCell(point.control.conversations, formatCount(point.control.conversations)),
            numCell(point.control.turns, formatCount(point.control.turns)),
          ],
        );
      }),
      "The plan has not started: no traffic to show",
    );
    var bounds = axisBounds(data, marks);
    chartShow(byId("chart-samples"), {
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
      legend: { top: 0 },
      grid: { left: 56, right: 24, top: 36, bottom: 32 },
      xAxis: { type: "time", min: bounds.min, max: bounds.max },
      yAxis: { type: "value", name: "conversations", minInterval: 1 },
      series: COHORTS.map(function (cohort, index) {
        var series = {
          name: COHORT_LABELS[cohort],
          type: "bar",
          barMaxWidth: 18,
          itemStyle: { color: COHORT_COLOURS[cohort] },
          data: points.map(function (point, i) {
            return [at[i], point[cohort].conversations];
          }),
        };
        if (index === 0) {
          series.markLine = { silent: true, symbol: ["none", "none"], animation: false, data: marks };
        }
        return series;
      }),
    });
  }

  function drawPlan(plan) {
    setFigure("plan-status", null, plan.status_label);
    byId("plan-status").setAttribute("data-status", plan.status);
    var what =
      plan.target === "version"
        ? "version " + (plan.candidate || "?") + " (candidate) against version " + (plan.control || "?") + " (control) of " + plan.profile
        : "the multi-agent mode" + (plan.profile ? " (watching " + plan.profile + ")" : "");
    byId("plan-what").textContent = what;
    // Counted from 1, as routing.rollout_words says it everywhere ("stage 2 of 3 (50 %)").
    var shareOfStage = plan.stages[Math.min(plan.stage, plan.stages.length - 1)];
    setFigure("plan-stage", plan.stage + 1, plan.stage + 1 + " of " + plan.stages.length + " (" + shareOfStage + " %)");
    var share =
      plan.status === "completed"
        ? "the candidate is served to every new conversation"
        : plan.status === "ready"
          ? "not started"
          : "now " + plan.percentage + " % of new conversations";
    byId("plan-stages").textContent =
      share + "; stages " + plan.stages.join(" → ") + " %, each at least " + plan.min_conversations +
      " conversations and " + plan.hold_minutes + " min";
  }

  var metricLabels = {}; // a guard metric's name → its label, from the API's metrics

  function verdictList(verdicts) {
    if (!verdicts.length) {
      return el("td", { className: "rollout-verdicts", text: "–" });
    }
    return el(
      "td",
      { className: "rollout-verdicts" },
      verdicts.map(function (verdict) {
        return el(
          "span",
          {
            className: "rollout-verdict " + (verdict.breached ? "rollout-verdict-breached" : "rollout-verdict-clear"),
            title: verdict.reason,
            "data-metric": verdict.metric,
            "data-breached": String(verdict.breached),
          },
          [VERDICT_MARK[verdict.breached] + " " + (metricLabels[verdict.metric] || verdict.metric)],
        );
      }),
    );
  }

  function drawDecisions(decisions) {
    fillRows(
      byId("table-decisions"),
      decisions.map(function (decision) {
        var samples = decision.samples || {};
        var shown = COHORTS.map(function (cohort) {
          return samples[cohort] ? formatCount(samples[cohort].conversations) : "–";
        }).join(" / ");
        return el(
          "tr",
          {
            className: "rollout-decision rollout-decision-" + decision.action,
            "data-decision-id": decision.id,
            "data-action": decision.action,
            "data-percentage": decision.percentage,
          },
          [
            el("td", { text: formatWhen(decision.at) }),
            el("td", {}, [el("span", { className: "rollout-action rollout-action-" + decision.action, text: decision.action_label })]),
            numCell(decision.stage + 1, formatCount(decision.stage + 1)),
            numCell(decision.percentage, decision.percentage + " %"),
            el("td", { className: "num", text: shown }),
            el("td", { className: "rollout-reason", text: decision.reason }),
            verdictList(decision.verdicts || []),
            el("td", { text: (decision.by || decision.actor) + (decision.webhook ? " · webhook " + decision.webhook : "") }),
          ],
        );
      }),
      "No decisions yet",
    );
  }

  function draw(data) {
    data.metrics.forEach(function (metric) {
      metricLabels[metric.name] = metric.label;
    });
    drawPlan(data.plan);
    var series = data.series;
    byId("rollout-span").textContent = series.start
      ? "From " + formatWhen(series.start) + " to " + formatWhen(series.end) + " UTC" + (data.plan.finished_at ? "" : " (now)") + ", in " + series.slices + " slices."
      : "The plan has not started.";
    var at = middles(series.points);
    var marks = markers(data);
    var container = byId("rollout-metrics");
    Object.keys(charts).forEach(function (id) {
      charts[id].dispose();
      delete charts[id];
    });
    container.replaceChildren();
    if (series.points.length) {
      drawSamples(data, at, marks);
      data.metrics.forEach(function (metric) {
        drawMetric(container, metric, data, at, marks);
      });
    } else {
      byId("chart-samples").hidden = true;
      fillRows(byId("table-samples"), [], "The plan has not started: no traffic to show");
    }
    drawDecisions(data.decisions);
  }

  // --- loading ------------------------------------------------------------------------------------------

  function load(slices) {
    var params = new URLSearchParams();
    if (slices) {
      params.set("slices", slices);
    }
    var query = params.toString();
    root.dataset.state = "loading";
    root.setAttribute("aria-busy", "true");
    byId("analytics-error").hidden = true;
    return fetch(API + (query ? "?" + query : ""), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response
          .json()
          .catch(function () {
            return null;
          })
          .then(function (body) {
            if (!response.ok) {
              var error = (body && body.error) || {};
              var fields = Object.keys(error.fields || {})
                .map(function (name) {
                  return name + ": " + error.fields[name].join(" ");
                })
                .join("; ");
              throw new Error(fields || error.message || "HTTP " + response.status);
            }
            return body;
          });
      })
      .then(function (data) {
        draw(data);
        root.dataset.query = query;
        root.dataset.state = "ready";
      })
      .catch(function (error) {
        var note = byId("analytics-error");
        note.textContent = "The rollout could not be loaded: " + error.message + ".";
        note.hidden = false;
        root.dataset.query = query;
        root.dataset.state = "error";
      })
      .then(function () {
        root.removeAttribute("aria-busy");
      });
  }

  function slicesFromUrl() {
    return new URLSearchParams(window.location.search).get("slices") || "";
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var slices = byId("filter-slices").value.trim();
    var url = new URL(window.location.href);
    if (slices) {
      url.searchParams.set("slices", slices);
    } else {
      url.searchParams.delete("slices");
    }
    window.history.pushState(null, "", url);
    load(slices);
  });
  window.addEventListener("popstate", function () {
    byId("filter-slices").value = slicesFromUrl() || byId("filter-slices").defaultValue;
    load(slicesFromUrl());
  });
  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (id) {
      charts[id].resize();
    });
  });

  var initial = slicesFromUrl();
  if (initial) {
    byId("filter-slices").value = initial;
  }
  load(initial);
})();
