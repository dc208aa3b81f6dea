/*
 * The analytics dashboard (/analytics/): reads the filters, calls the analytics API with the page's session,
 * and draws each answer twice: as an Apache ECharts chart and as text (figures and tables carrying data-*
 * attributes with the raw numbers). No framework, no build step.
 *
 * When everything is drawn, #content-main gets data-state="ready" and data-query=<the query string used>;
 * on a failure data-state="error" and #analytics-error says what went wrong.
 */
(function () {
  "use strict";

  // ECharts renders tooltips as HTML: every name that comes from data (agent, tool, method, cohort) is escaped.
  var escapeHtml = window.AnalyticsDom.escapeHtml;
  var byId = window.AnalyticsDom.byId;
  var el = window.AnalyticsDom.el;

  var root = document.getElementById("content-main");
  var form = document.getElementById("analytics-filters");
  if (!root || !form) {
    return;
  }

  var API = root.dataset.apiBase;
  var ENDPOINTS = {
    handoffs: "handoffs",
    timeline: "handoffs/timeline",
    agents: "agents",
    methods: "routing-methods",
    cohorts: "cohorts",
    languages: "languages",
    loopStops: "loop-stops",
    delegations: "delegations",
    tools: "tools",
    recent: "handoffs/recent",
    goals: "goals",
    usage: "usage",
    feedback: "feedback",
    feedbackTimeline: "feedback/timeline",
    feedbackBreakdown: "feedback/breakdown",
    feedbackRecent: "feedback/recent",
    knowledgeGaps: "knowledge/gaps",
    outcomes: "outcomes",
    outcomesTimeline: "outcomes/timeline",
    quality: "quality",
    rollouts: "rollouts",
  };
  var DEFAULT_DAYS = "30";
  var HOUR_BUCKET_MAX_DAYS = 2; // "automatic" draws hours for ranges this short, days otherwise
  var RECENT_LIMIT = 20;
  var RATED_DOWN_LIMIT = 10;
  var ENDED_PLANS_SHOWN = 3; // per profile, besides the plans running, paused or ready
  var EMPTY_HANDOFFS = "No handoffs in this period";

  var METHOD_LABELS = {
    state: "Conversation state policy",
    keyword: "Keyword match",
    examples: "Examples (similarity)",
    llm: "LLM classifier",
    fallback: "Fallback specialist",
  };
  var KIND_LABELS = {
    handoff: "Agent handoff",
    routing_handoff: "Routing handoff",
    delegation: "Delegation",
    return: "Return",
    supervisor_fanout: "Supervisor fan-out",
    backend_handoff: "Backend handoff",
    human: "To or from a person",
  };
  var KIND_SHORT_LABELS = {
    handoff: "Agent",
    routing_handoff: "Routing",
    delegation: "Delegation",
    return: "Return",
    supervisor_fanout: "Fan-out",
    backend_handoff: "Backend",
    human: "Person",
  };
  // What model calls were made for (the usage rows' purpose).
  var PURPOSE_LABELS = {
    conversation: "Conversations",
    publish_gate: "Publish gate",
    routing_tests: "Routing tests",
    route_preview: "Route preview",
    impact_preview: "Impact preview",
    debug: "Debug API",
  };
  var LANGUAGE_LABELS = { pt: "Portuguese", es: "Spanish", en: "English", none: "Not told" };
  var COHORT_LABELS = { multi_agent: "Multi-agent", single_agent: "Single-agent", "": "Not decided" };

  var charts = {};
  var loadSerial = 0;

  // --- formatting --------------------------------------------------------------------------------------

  var integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  var decimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 2 });

  function isNumber(value) {
    return typeof value === "number" && isFinite(value);
  }

  function formatCount(value) {
    return isNumber(value) ? integer.format(value) : "–";
  }

  function formatPercent(value) {
    return isNumber(value) ? decimal.format(value) + " %" : "–";
  }

  function formatNumber(value) {
    if (!isNumber(value)) {
      return "–";
    }
    return Number.isInteger(value) ? integer.format(value) : decimal.format(value);
  }

  function humanise(key) {
    var text = String(key).replace(/_/g, " ");
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  function formatWhen(iso) {
    // "2026-11-20T14:03:00Z" -> "2026-11-20 14:03" (the API speaks UTC, and so does the page)
    if (typeof iso !== "string") {
      return "–";
    }
    return iso.replace("T", " ").replace(/(:\d\d)(\.\d+)?(Z|[+-]00:?00)?$/, "$1").slice(0, 16);
  }

  function formatPeriod(iso, bucket) {
    if (typeof iso !== "string") {
      return String(iso);
    }
    return bucket === "hour" ? formatWhen(iso) : iso.slice(0, 10);
  }

  // --- small DOM helpers ------------------------------------------------------------------------------

  function setFigure(id, value, text) {
    var node = byId(id);
    if (!node) {
      return;
    }
    node.textContent = text;
    node.setAttribute("data-value", isNumber(value) ? String(value) : "");
  }

  function fillTable(table, headers, rows, emptyText) {
    var thead = table.tHead || table.createTHead();
    var tbody = table.tBodies[0] || table.createTBody();
    if (headers) {
      thead.replaceChildren(
        el(
          "tr",
          {},
          headers.map(function (header) {
            return el("th", { scope: "col", className: header.numeric ? "num" : "", text: header.label });
          }),
        ),
      );
    }
    var columns = thead.rows.length ? thead.rows[0].cells.length : 1;
    if (!rows.length) {
      tbody.replaceChildren(el("tr", { className: "analytics-empty" }, [el("td", { colspan: columns, text: emptyText })]));
      return;
    }
    tbody.replaceChildren.apply(tbody, rows);
  }

  function cell(text, attrs) {
    return el("td", attrs || {}, [text]);
  }

  function numCell(value, text) {
    return el("td", { className: "num", "data-value": isNumber(value) ? value : "" }, [text]);
  }

  // --- charts -------------------------------------------------------------------------------------------

  // The admin's colour theme: "dark", "light", or "auto" (the system's preference).
  function darkTheme() {
    var theme = document.documentElement.dataset.theme;
    if (theme === "dark" || theme === "light") {
      return theme === "dark";
    }
    return Boolean(window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
  }

  var shownOptions = {};

  function chartShow(id, option, emptyText) {
    var node = byId(id);
    var note = node.parentNode.querySelector('.analytics-chart-empty[data-for="' + id + '"]');
    if (!note) {
      note = el("p", { className: "analytics-chart-empty", "data-for": id, hidden: "" });
      node.parentNode.insertBefore(note, node);
    }
    if (!option) {
      if (charts[id]) {
        charts[id].dispose();
        delete charts[id];
      }
      delete shownOptions[id];
      node.hidden = true;
      node.removeAttribute("data-rendered");
      note.textContent = emptyText;
      note.hidden = false;
      return;
    }
    note.hidden = true;
    node.hidden = false;
    option.backgroundColor = "transparent"; // the panel's own background, in either theme
    shownOptions[id] = option;
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

  var TEXT_STYLE = { fontFamily: "inherit" };

  // --- the sections ---------------------------------------------------------------------------------

  function drawHandoffs(data) {
    setFigure("kpi-total-handoffs", data.total_handoffs, formatCount(data.total_handoffs));
    setFigure("kpi-handoff-rate", data.handoff_rate_percentage, formatPercent(data.handoff_rate_percentage));
    setFigure(
      "kpi-conversations-with-handoffs",
      data.conversations_with_handoffs,
      formatCount(data.conversations_with_handoffs),
    );
    setFigure("kpi-total-conversations", data.total_conversations, formatCount(data.total_conversations));

    var paths = data.handoff_paths || [];
    fillTable(
      byId("table-paths"),
      null,
      paths.map(function (path) {
        return el("tr", { "data-profile": path.profile, "data-from": path.from, "data-to": path.to, "data-count": path.count }, [
          cell(path.profile),
          cell(path.from),
          cell(path.to),
          numCell(path.count, formatCount(path.count)),
        ]);
      }),
      EMPTY_HANDOFFS,
    );
    if (!paths.length) {
      chartShow("chart-paths", null, EMPTY_HANDOFFS);
      return;
    }
    // Two columns, senders left and receivers right: handoffs go both ways (A→B and B→A), and a Sankey must
    // not have cycles, so each agent appears once per side.
    // Agents are named within their profile: with several profiles, each node says whose agent it is.
    var profiles = {};
    paths.forEach(function (path) {
      profiles[path.profile] = true;
    });
    var qualify = Object.keys(profiles).length > 1;
    function nodeName(path, agent) {
      return qualify ? path.profile + " · " + agent : agent;
    }
    var nodes = {};
    var links = paths.map(function (path) {
      var source = "from|" + nodeName(path, path.from);
      var target = "to|" + nodeName(path, path.to);
      nodes[source] = { name: source };
      nodes[target] = { name: target };
      return { source: source, target: target, value: path.count };
    });
    function agentOf(name) {
      return String(name).split("|").slice(1).join("|");
    }
    chartShow("chart-paths", {
      textStyle: TEXT_STYLE,
      tooltip: {
        trigger: "item",
        formatter: function (params) {
          if (params.dataType === "edge") {
            return (
              escapeHtml(agentOf(params.data.source)) +
              " → " +
              escapeHtml(agentOf(params.data.target)) +
              ": " +
              formatCount(params.data.value) +
              " handoffs"
            );
          }
          var side = String(params.name).indexOf("from|") === 0 ? "handed off" : "received";
          return escapeHtml(agentOf(params.name)) + " " + side + " " + formatCount(params.value) + " handoffs";
        },
      },
      series: [
        {
          type: "sankey",
          left: 8,
          right: 120,
          top: 8,
          bottom: 8,
          nodeAlign: "justify",
          draggable: false,
          emphasis: { focus: "adjacency" },
          lineStyle: { color: "gradient", opacity: 0.45 },
          label: {
            formatter: function (params) {
              return agentOf(params.name);
            },
          },
          data: Object.keys(nodes).map(function (key) {
            return nodes[key];
          }),
          links: links,
        },
      ],
    });
  }

  function drawTimeline(rows, bucket) {
    var unit = bucket === "hour" ? "(handoffs per hour, UTC)" : "(handoffs per day, UTC)";
    byId("timeline-unit").textContent = unit;
    var kinds = [];
    rows.forEach(function (row) {
      Object.keys(row.by_kind || {}).forEach(function (kind) {
        if (kinds.indexOf(kind) < 0) {
          kinds.push(kind);
        }
      });
    });
    kinds.sort();
    var headers = [{ label: bucket === "hour" ? "Hour (UTC)" : "Day (UTC)" }, { label: "Handoffs", numeric: true }];
    kinds.forEach(function (kind) {
      headers.push({ label: KIND_SHORT_LABELS[kind] || humanise(kind), numeric: true });
    });
    fillTable(
      byId("table-timeline"),
      headers,
      // Newest first in the table, where the latest days matter most; the chart runs left to right.
      rows.slice().reverse().map(function (row) {
        var cells = [cell(formatPeriod(row.period, bucket)), numCell(row.count, formatCount(row.count))];
        kinds.forEach(function (kind) {
          var value = (row.by_kind || {})[kind] || 0;
          cells.push(numCell(value, formatCount(value)));
        });
        return el("tr", { "data-period": row.period, "data-count": row.count, "data-by-kind": row.by_kind || {} }, cells);
      }),
      EMPTY_HANDOFFS,
    );
    var total = rows.reduce(function (sum, row) {
      return sum + (row.count || 0);
    }, 0);
    if (!total) {
      chartShow("chart-timeline", null, EMPTY_HANDOFFS);
      return;
    }
    var series = (kinds.length ? kinds : ["all"]).map(function (kind) {
      return {
        name: KIND_LABELS[kind] || (kind === "all" ? "Handoffs" : humanise(kind)),
        type: "bar",
        stack: "handoffs",
        barMaxWidth: 28,
        emphasis: { focus: "series" },
        data: rows.map(function (row) {
          return [row.period, kind === "all" ? row.count : (row.by_kind || {})[kind] || 0];
        }),
      };
    });
    chartShow("chart-timeline", {
      textStyle: TEXT_STYLE,
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
      legend: { top: 0 },
      grid: { left: 48, right: 16, top: 36, bottom: 32 },
      xAxis: { type: "time" },
      yAxis: { type: "value", name: "handoffs", minInterval: 1 },
      series: series,
    });
  }

  var PATH_LABELS = {
    routed: "chosen by routing",
    single_agent: "single-agent path",
  };

  function agentLabel(row, qualify) {
    var name = qualify ? row.profile + " · " + row.agent : row.agent;
    return row.path === "single_agent" ? name + " (single-agent path)" : name;
  }

  function drawAgents(rows) {
    var empty = "No answered turns in this period";
    var profiles = {};
    rows.forEach(function (row) {
      profiles[row.profile] = true;
    });
    var qualify = Object.keys(profiles).length > 1;
    fillTable(
      byId("table-agents"),
      null,
      rows.map(function (row) {
        var attrs = {
          "data-profile": row.profile,
          "data-agent": row.agent,
          "data-path": row.path,
          "data-turns": row.turns,
          "data-share": row.share_percentage,
        };
        return el("tr", attrs, [
          cell(row.profile),
          cell(row.agent),
          cell(PATH_LABELS[row.path] || humanise(row.path)),
          numCell(row.turns, formatCount(row.turns)),
          numCell(row.share_percentage, formatPercent(row.share_percentage)),
        ]);
      }),
      empty,
    );
    if (!rows.length) {
      chartShow("chart-agents", null, empty);
      return;
    }
    var ordered = rows.slice().reverse(); // the largest at the top of a horizontal bar chart
    chartShow("chart-agents", {
      textStyle: TEXT_STYLE,
      tooltip: {
        trigger: "item",
        formatter: function (params) {
          var row = ordered[params.dataIndex];
          var share = formatPercent(row.share_percentage);
          return escapeHtml(agentLabel(row, true)) + ": " + formatCount(row.turns) + " turns (" + share + ")";
        },
      },
      grid: { left: 8, right: 64, top: 8, bottom: 24, containLabel: true },
      xAxis: { type: "value", max: 100, axisLabel: { formatter: "{value} %" } },
      yAxis: {
        type: "category",
        data: ordered.map(function (row) {
          return agentLabel(row, qualify);
        }),
      },
      series: [
        {
          type: "bar",
          barMaxWidth: 22,
          label: {
            show: true,
            position: "right",
            formatter: function (params) {
              return formatPercent(params.value);
            },
          },
          // The single-agent path's bars are hatched apart: they are the general agent answering everything.
          data: ordered.map(function (row) {
            return row.path === "single_agent"
              ? { value: row.share_percentage, itemStyle: { color: "#b0b7c3", decal: { symbol: "rect", dashArrayX: [1, 0], dashArrayY: [3, 5], rotation: -0.8 } } }
              : row.share_percentage;
          }),
        },
      ],
    });
  }

  function drawMethods(data) {
    var methods = data.methods || [];
    setFigure("kpi-fallback-rate", data.fallback_rate_percentage, formatPercent(data.fallback_rate_percentage));
    setFigure("kpi-routing-total", data.total, formatCount(data.total));
    var empty = "No routing decisions in this period";
    fillTable(
      byId("table-methods"),
      null,
      methods.map(function (row) {
        return el("tr", { "data-method": row.method, "data-count": row.count, "data-share": row.share_percentage }, [
          cell(METHOD_LABELS[row.method] || humanise(row.method)),
          numCell(row.count, formatCount(row.count)),
          numCell(row.share_percentage, formatPercent(row.share_percentage)),
        ]);
      }),
      empty,
    );
    if (!methods.length) {
      chartShow("chart-methods", null, empty);
      return;
    }
    chartShow("chart-methods", {
      textStyle: TEXT_STYLE,
      tooltip: {
        trigger: "item",
        formatter: function (params) {
          var share = formatPercent(params.percent);
          return escapeHtml(params.name) + ": " + formatCount(params.value) + " decisions (" + share + ")";
        },
      },
      legend: { bottom: 0 },
      series: [
        {
          type: "pie",
          radius: ["40%", "68%"],
          center: ["50%", "45%"],
          label: { formatter: "{d} %" },
          data: methods.map(function (row) {
            return { name: METHOD_LABELS[row.method] || humanise(row.method), value: row.count };
          }),
        },
      ],
    });
  }

  // --- tables of records ------------------------------------------------------------------------------

  // One row per record, one column per field; each row carries its record as data-* attributes
  // (data-agent="billing_agent" data-count="3") for whoever reads the page without the charts.
  function recordsTable(id, records, columns, emptyText) {
    fillTable(
      byId(id),
      null,
      records.map(function (record) {
        var attrs = {};
        Object.keys(record).forEach(function (key) {
          var value = record[key];
          if (value !== null && typeof value !== "object") {
            attrs["data-" + key.replace(/_/g, "-")] = value;
          }
        });
        return el(
          "tr",
          attrs,
          columns.map(function (column) {
            var value = record[column.key];
            var text = column.format ? column.format(value, record) : value === "" || value == null ? "–" : String(value);
            return column.numeric ? numCell(value, text) : cell(text);
          }),
        );
      }),
      emptyText,
    );
  }

  var STOP_LABELS = {
    ping_pong: "Ping-pong (back and forth between two agents)",
    path_repeated: "The same path again",
    handoff_limit: "Too many handoffs in one turn",
    step_limit: "Too many steps in one turn",
  };
  var OUTCOME_LABELS = { completed: "Completed", out_of_scope: "Out of scope" };

  function labelled(labels) {
    return function (value) {
      return labels[value] || humanise(value || "(none)");
    };
  }

  function formatMs(value) {
    return isNumber(value) ? decimal.format(value) + " ms" : "–";
  }

  function drawLoopStops(data) {
    setFigure("kpi-loop-stops", data.total_stopped, formatCount(data.total_stopped));
    setFigure("stops-total", data.total_stopped, formatCount(data.total_stopped));
    setFigure("stops-refused", data.total_refused, formatCount(data.total_refused));
    recordsTable(
      "table-stops-outcome",
      data.by_outcome || [],
      [
        { key: "outcome", format: labelled(STOP_LABELS) },
        { key: "count", numeric: true, format: formatCount },
      ],
      "No loop-safety stops in this period",
    );
    recordsTable(
      "table-stops-agent",
      data.by_agent || [],
      [{ key: "profile" }, { key: "agent" }, { key: "count", numeric: true, format: formatCount }],
      "No loop-safety stops in this period",
    );
    recordsTable(
      "table-stops-pair",
      data.by_pair || [],
      [
        { key: "profile" },
        {
          key: "from",
          format: function (value, record) {
            return value + " → " + (record.to || "(no target: out of steps)");
          },
        },
        {
          key: "by_outcome",
          format: function (value) {
            return Object.keys(value || {})
              .map(function (outcome) {
                return labelled(STOP_LABELS)(outcome) + ": " + formatCount(value[outcome]);
              })
              .join("; ");
          },
        },
        { key: "count", numeric: true, format: formatCount },
      ],
      "No loop-safety stops in this period",
    );
    recordsTable(
      "table-refused-agent",
      data.refused_by_agent || [],
      [{ key: "profile" }, { key: "agent" }, { key: "count", numeric: true, format: formatCount }],
      "No refused handoffs in this period",
    );
  }

  function drawDelegations(data) {
    setFigure("delegations-total", data.total_delegations, formatCount(data.total_delegations));
    setFigure("returns-total", data.total_returns, formatCount(data.total_returns));
    recordsTable(
      "table-returns-outcome",
      data.returns_by_outcome || [],
      [
        { key: "outcome", format: labelled(OUTCOME_LABELS) },
        { key: "count", numeric: true, format: formatCount },
        { key: "share_percentage", numeric: true, format: formatPercent },
      ],
      "No returns from delegations in this period",
    );
    recordsTable(
      "table-returns-specialist",
      data.returns_by_specialist || [],
      [{ key: "profile" }, { key: "agent" }, { key: "count", numeric: true, format: formatCount }],
      "No returns from delegations in this period",
    );
  }

  function drawTools(data) {
    setFigure("tools-calls", data.total_calls, formatCount(data.total_calls));
    setFigure("tools-errors", data.total_errors, formatCount(data.total_errors));
    setFigure("tools-permission-asks", data.total_permission_asks, formatCount(data.total_permission_asks));
    recordsTable(
      "table-tools",
      data.tools || [],
      [
        { key: "tool" },
        { key: "server" },
        { key: "calls", numeric: true, format: formatCount },
        { key: "permission_asks", numeric: true, format: formatCount },
        { key: "errors", numeric: true, format: formatCount },
        { key: "error_rate_percentage", numeric: true, format: formatPercent },
        { key: "avg_latency_ms", numeric: true, format: formatMs },
      ],
      "No MCP tool calls in this period",
    );
  }

  // --- usage -------------------------------------------------------------------------------------------

  function formatCost(value, record) {
    return isNumber(value) ? value.toFixed(4) + " " + record.currency : "no price";
  }

  function drawUsage(data) {
    var totals = data.totals || {};
    var rows = data.rows || [];
    var unpriced = data.unpriced_models || [];
    var empty = "No answers written by a model in this period";
    setFigure("usage-answers", totals.answers, formatCount(totals.answers));
    setFigure("usage-tokens", totals.total_tokens, formatCount(totals.total_tokens));
    setFigure("usage-prompt-tokens", totals.prompt_tokens, formatCount(totals.prompt_tokens));
    setFigure("usage-completion-tokens", totals.completion_tokens, formatCount(totals.completion_tokens));
    setFigure("usage-cost", totals.cost, isNumber(totals.cost) ? formatCost(totals.cost, totals) : "–");
    byId("usage-unpriced").textContent = unpriced.length
      ? "Models without a price (not in the cost): " + unpriced.join(", ") + "."
      : "";
    recordsTable(
      "table-usage",
      rows,
      [
        { key: "day" },
        { key: "tenant" },
        { key: "profile" },
        { key: "model" },
        {
          key: "purpose",
          format: function (value) {
            return PURPOSE_LABELS[value] || humanise(value || "");
          },
        },
        { key: "answers", numeric: true, format: formatCount },
        { key: "prompt_tokens", numeric: true, format: formatCount },
        { key: "completion_tokens", numeric: true, format: formatCount },
        { key: "cost", numeric: true, format: formatCost },
      ],
      empty,
    );
    if (!rows.length) {
      chartShow("chart-usage", null, empty);
      return;
    }
    var byModel = {};
    rows.forEach(function (row) {
      var days = (byModel[row.model] = byModel[row.model] || {});
      days[row.day] = (days[row.day] || 0) + row.total_tokens;
    });
    chartShow("chart-usage", {
      textStyle: TEXT_STYLE,
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
      legend: { top: 0 },
      grid: { left: 64, right: 16, top: 36, bottom: 32 },
      xAxis: { type: "time" },
      yAxis: { type: "value", name: "tokens" },
      series: Object.keys(byModel)
        .sort()
        .map(function (model) {
          return {
            name: model,
            type: "bar",
            stack: "tokens",
            barMaxWidth: 28,
            data: Object.keys(byModel[model]).sort().map(function (day) {
              return [day, byModel[model][day]];
            }),
          };
        }),
    });
  }

  // --- goals -------------------------------------------------------------------------------------------

  var GOAL_STATUSES = ["success", "clarification", "failure", "general"];
  var GOAL_STATUS_LABELS = {
    success: "Succeeded",
    clarification: "Asked to clarify",
    failure: "Failed",
    general: "General (no goal)",
  };
  var CLARIFICATION_LABELS = {
    low_confidence: "Not sure of the goal",
    missing_entity: "Something missing",
    ambiguous: "Ambiguous (several matches)",
  };

  function goalName(row) {
    return row.goal ? row.domain + " · " + row.goal : row.domain || "(none)";
  }

  function drawGoals(data) {
    var summary = data.summary || {};
    var goals = data.goals || [];
    var empty = "No goal-mode answers in this period";
    setFigure("goals-runs", summary.runs, formatCount(summary.runs));
    setFigure(
      "goals-clarification-rate",
      summary.clarification_rate_percentage,
      formatPercent(summary.clarification_rate_percentage),
    );
    setFigure("goals-failure-rate", summary.failure_rate_percentage, formatPercent(summary.failure_rate_percentage));
    setFigure("goals-p50", summary.p50_plan_latency_ms, formatMs(summary.p50_plan_latency_ms));
    setFigure("goals-p95", summary.p95_plan_latency_ms, formatMs(summary.p95_plan_latency_ms));
    setFigure("goals-plans-run", summary.plans_run, formatCount(summary.plans_run));
    setFigure("goals-steps", summary.steps, formatCount(summary.steps));
    setFigure("goals-failed-steps", summary.failed_steps, formatCount(summary.failed_steps));
    recordsTable(
      "table-goals",
      goals,
      [
        { key: "domain" },
        { key: "goal" },
        { key: "runs", numeric: true, format: formatCount },
        { key: "success", numeric: true, format: formatCount },
        { key: "clarification", numeric: true, format: formatCount },
        { key: "failure", numeric: true, format: formatCount },
        { key: "general", numeric: true, format: formatCount },
      ],
      empty,
    );
    recordsTable(
      "table-clarification-reasons",
      summary.clarification_reasons || [],
      [
        { key: "reason", format: labelled(CLARIFICATION_LABELS) },
        { key: "count", numeric: true, format: formatCount },
      ],
      "No clarifications asked in this period",
    );
    recordsTable(
      "table-capabilities",
      data.capabilities || [],
      [
        { key: "capability" },
        { key: "domain" },
        { key: "steps", numeric: true, format: formatCount },
        { key: "failures", numeric: true, format: formatCount },
        { key: "skipped", numeric: true, format: formatCount },
        { key: "failure_rate_percentage", numeric: true, format: formatPercent },
        { key: "avg_latency_ms", numeric: true, format: formatMs },
        { key: "p95_latency_ms", numeric: true, format: formatMs },
      ],
      "No plan steps in this period",
    );
    if (!goals.length) {
      chartShow("chart-goals", null, empty);
      return;
    }
    var ordered = goals.slice().reverse(); // the most answered at the top of a horizontal bar chart
    var names = ordered.map(goalName);
    chartShow("chart-goals", {
      textStyle: TEXT_STYLE,
      tooltip: {
        trigger: "item",
        formatter: function (params) {
          return (
            escapeHtml(names[params.dataIndex]) +
            " — " +
            escapeHtml(params.seriesName) +
            ": " +
            formatCount(params.value) +
            " answers"
          );
        },
      },
      legend: { top: 0 },
      grid: { left: 8, right: 24, top: 36, bottom: 24, containLabel: true },
      xAxis: { type: "value", minInterval: 1 },
      yAxis: { type: "category", data: names },
      series: GOAL_STATUSES.map(function (status) {
        return {
          type: "bar",
          stack: "answers",
          name: GOAL_STATUS_LABELS[status],
          barMaxWidth: 22,
          emphasis: { focus: "series" },
          data: ordered.map(function (row) {
            return row[status] || 0;
          }),
        };
      }),
    });
  }

  // --- cohorts -----------------------------------------------------------------------------------------

  var COHORT_MEASURES = [
    { key: "conversations", label: "Conversations", format: formatCount },
    { key: "messages", label: "User messages", format: formatCount, chart: "Messages" },
    { key: "answers", label: "Answers", format: formatCount },
    { key: "handoffs", label: "Handoffs", format: formatCount },
    { key: "handoff_rate_percentage", label: "Handoff rate", format: formatPercent, chart: "Handoff rate (%)" },
    { key: "avg_judge_score", label: "Judge score (average)", format: formatNumber, chart: "Judge score" },
    { key: "avg_latency_ms", label: "Latency (average)", format: formatMs, chart: "Latency (ms, average)" },
    { key: "p50_latency_ms", label: "Latency (median)", format: formatMs, percentile: true },
    { key: "p95_latency_ms", label: "Latency (95th percentile)", format: formatMs, percentile: true },
  ];

  function drawCohorts(data) {
    var cohorts = data.cohorts || [];
    var empty = "No conversations decided by the multi_agent flag in this period";
    var measures = COHORT_MEASURES.filter(function (measure) {
      return !measure.percentile || data.percentiles;
    });
    var any = cohorts.some(function (cohort) {
      return cohort.messages || cohort.answers || cohort.conversations;
    });
    var names = cohorts.map(function (cohort) {
      return COHORT_LABELS[cohort.cohort] || humanise(cohort.cohort);
    });
    fillTable(
      byId("table-cohorts"),
      [{ label: "Measure" }].concat(
        names.map(function (name) {
          return { label: name, numeric: true };
        }),
      ),
      any
        ? measures.map(function (measure) {
            return el(
              "tr",
              { "data-measure": measure.key },
              [el("th", { scope: "row", text: measure.label })].concat(
                cohorts.map(function (cohort) {
                  var td = numCell(cohort[measure.key], measure.format(cohort[measure.key]));
                  td.setAttribute("data-cohort", cohort.cohort);
                  return td;
                }),
              ),
            );
          })
        : [],
      empty,
    );
    if (!any) {
      chartShow("chart-cohorts", null, empty);
      return;
    }
    // One small bar chart per measure, the cohorts side by side: the measures have different units.
    var charted = measures.filter(function (measure) {
      return measure.chart;
    });
    var width = 100 / charted.length;
    var option = { textStyle: TEXT_STYLE, tooltip: { trigger: "item" }, title: [], grid: [], xAxis: [], yAxis: [], series: [] };
    charted.forEach(function (measure, index) {
      option.title.push({
        text: measure.chart,
        left: index * width + width / 2 + "%",
        textAlign: "center",
        top: 0,
        textStyle: { fontSize: 12, fontWeight: "normal" },
      });
      option.grid.push({ left: index * width + 2 + "%", width: width - 4 + "%", top: 40, bottom: 8, containLabel: true });
      option.xAxis.push({ type: "category", gridIndex: index, data: names, axisLabel: { interval: 0, fontSize: 11 } });
      option.yAxis.push({ type: "value", gridIndex: index, splitNumber: 3 });
      option.series.push({
        type: "bar",
        name: measure.label,
        xAxisIndex: index,
        yAxisIndex: index,
        barMaxWidth: 36,
        colorBy: "data",
        label: {
          show: true,
          position: "top",
          fontSize: 11,
          formatter: function (params) {
            return measure.format(params.value);
          },
        },
        tooltip: {
          formatter: function (params) {
            return escapeHtml(params.name) + " — " + measure.label + ": " + measure.format(params.value);
          },
        },
        data: cohorts.map(function (cohort) {
          return isNumber(cohort[measure.key]) ? cohort[measure.key] : null;
        }),
      });
    });
    chartShow("chart-cohorts", option, empty);
  }

  // --- languages ---------------------------------------------------------------------------------------

  function drawLanguages(data) {
    var languages = data.languages || [];
    var empty = "No conversations in this period";
    var name = labelled(LANGUAGE_LABELS);
    var any = languages.some(function (row) {
      return row.conversations || row.messages || row.answers || row.routed;
    });
    recordsTable(
      "table-languages",
      any ? languages : [],
      [
        { key: "language", format: name },
        { key: "conversations", numeric: true, format: formatCount },
        { key: "messages", numeric: true, format: formatCount },
        { key: "answers", numeric: true, format: formatCount },
        { key: "avg_judge_score", numeric: true, format: formatNumber },
        { key: "routed", numeric: true, format: formatCount },
        { key: "fallback_rate_percentage", numeric: true, format: formatPercent },
      ],
      empty,
    );
    if (!any) {
      chartShow("chart-languages", null, empty);
      return;
    }
    var names = languages.map(function (row) {
      return name(row.language);
    });
    chartShow("chart-languages", {
      textStyle: TEXT_STYLE,
      tooltip: {
        trigger: "axis",
        axisPointer: { type: "shadow" },
        formatter: function (params) {
          return [escapeHtml(params[0].name)]
            .concat(
              params.map(function (param) {
                return escapeHtml(param.seriesName) + ": " + formatCount(param.value);
              }),
            )
            .join("<br>");
        },
      },
      legend: { top: 0 },
      grid: { left: 8, right: 16, top: 36, bottom: 24, containLabel: true },
      xAxis: { type: "category", data: names },
      yAxis: { type: "value", minInterval: 1 },
      series: [
        ["conversations", "Conversations"],
        ["messages", "User messages"],
        ["answers", "Answers"],
      ].map(function (measure) {
        return {
          type: "bar",
          name: measure[1],
          barMaxWidth: 28,
          data: languages.map(function (row) {
            return row[measure[0]];
          }),
        };
      }),
    });
  }

  function drawRecent(rows, conversationUrl) {
    fillTable(
      byId("table-recent"),
      null,
      rows.map(function (row) {
        var name = row.conversation_key || "Conversation " + row.conversation_id;
        // No address: the reader may not open conversations in the admin, so the name is not a link.
        var link = conversationUrl
          ? el("a", {
              href: conversationUrl.replace("/0/", "/" + encodeURIComponent(row.conversation_id) + "/"),
              className: "analytics-conversation-link",
              "data-conversation-id": row.conversation_id,
              title: "Open the conversation in the admin",
              text: name,
            })
          : el("span", { "data-conversation-id": row.conversation_id, text: name });
        var status = humanise(row.status || "");
        if (row.outcome) {
          status += " (" + (STOP_LABELS[row.outcome] || OUTCOME_LABELS[row.outcome] || humanise(row.outcome)) + ")";
        }
        return el(
          "tr",
          {
            "data-handoff-id": row.id,
            "data-conversation-id": row.conversation_id,
            "data-from": row.from_agent,
            "data-to": row.to_agent,
            "data-kind": row.kind,
            "data-created-at": row.created_at,
          },
          [
            cell(formatWhen(row.created_at), { title: row.created_at }),
            cell(row.tenant || "–"),
            cell(row.profile || "–"),
            cell(row.from_agent + " → " + row.to_agent, { title: row.reason || "" }),
            cell(KIND_LABELS[row.kind] || humanise(row.kind || "")),
            cell(status),
            el("td", {}, [link]),
          ],
        );
      }),
      EMPTY_HANDOFFS,
    );
  }

  // --- customers' ratings -----------------------------------------------------------------------------

  var EMPTY_RATINGS = "No answer of this period was rated";
  var EMPTY_CITED_RATINGS = "No rated answer of this period cited a document";

  function drawFeedback(data) {
    var total = data.total || {};
    setFigure("feedback-rated", total.rated, formatCount(total.rated));
    setFigure("feedback-answers", total.answers, formatCount(total.answers));
    var ratedShare = total.answers ? Math.round((10000 * total.rated) / total.answers) / 100 : null;
    setFigure("feedback-rated-share", ratedShare, formatPercent(ratedShare));
    setFigure("feedback-down", total.down, formatCount(total.down));
    setFigure("feedback-negative-rate", total.negative_rate_percentage, formatPercent(total.negative_rate_percentage));
  }

  function drawFeedbackTimeline(rows, bucket) {
    byId("feedback-unit").textContent =
      bucket === "hour" ? "(answers rated up or down per hour, UTC)" : "(answers rated up or down per day, UTC)";
    fillTable(
      byId("table-feedback-timeline"),
      null,
      rows
        .slice()
        .reverse()
        .map(function (row) {
          return el("tr", { "data-period": row.period, "data-up": row.up, "data-down": row.down }, [
            cell(formatPeriod(row.period, bucket)),
            numCell(row.rated, formatCount(row.rated)),
            numCell(row.up, formatCount(row.up)),
            numCell(row.down, formatCount(row.down)),
            numCell(row.negative_rate_percentage, formatPercent(row.negative_rate_percentage)),
          ]);
        }),
      EMPTY_RATINGS,
    );
    var rated = rows.reduce(function (sum, row) {
      return sum + (row.rated || 0);
    }, 0);
    if (!rated) {
      chartShow("chart-feedback", null, EMPTY_RATINGS);
      return;
    }
    chartShow("chart-feedback", {
      textStyle: TEXT_STYLE,
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
      legend: { top: 0 },
      grid: { left: 48, right: 16, top: 36, bottom: 32 },
      xAxis: { type: "time" },
      yAxis: { type: "value", name: "answers", minInterval: 1 },
      series: [
        { key: "down", name: "Rated down", color: "#c62828" },
        { key: "up", name: "Rated up", color: "#2e7d32" },
      ].map(function (side) {
        return {
          name: side.name,
          type: "bar",
          stack: "ratings",
          barMaxWidth: 28,
          itemStyle: { color: side.color },
          emphasis: { focus: "series" },
          data: rows.map(function (row) {
            return [row.period, row[side.key] || 0];
          }),
        };
      }),
    });
  }

  function shareColumns(key, qualify) {
    return [
      {
        key: key,
        format: function (value, record) {
          var name = value === "" || value == null ? "(no route stored)" : String(value);
          return qualify && key !== "profile" ? record.profile + " · " + name : name;
        },
      },
      { key: "rated", numeric: true, format: formatCount },
      { key: "down", numeric: true, format: formatCount },
      { key: "negative_rate_percentage", numeric: true, format: formatPercent },
    ];
  }

  function drawFeedbackBreakdown(data) {
    var qualify = (data.profiles || []).length > 1; // intents and agents are named within their profile
    recordsTable("table-feedback-profiles", data.profiles || [], shareColumns("profile", false), EMPTY_RATINGS);
    recordsTable("table-feedback-intents", data.intents || [], shareColumns("intent", qualify), EMPTY_RATINGS);
    recordsTable("table-feedback-agents", data.agents || [], shareColumns("agent", qualify), EMPTY_RATINGS);
    recordsTable("table-feedback-documents", data.documents || [], shareColumns("title", qualify), EMPTY_CITED_RATINGS);
  }

  // --- knowledge gaps ---------------------------------------------------------------------------------

  var EMPTY_GAPS = "Every question of this period that searched the documents was answered from them";

  function drawKnowledgeGaps(data) {
    setFigure("gaps-unknown", data.unknown, formatCount(data.unknown));
    setFigure("gaps-searched", data.searched, formatCount(data.searched));
    setFigure("gaps-share", data.unknown_percentage, formatPercent(data.unknown_percentage));
    byId("gaps-read").textContent =
      data.read < data.unknown ? "Grouped: the latest " + formatCount(data.read) + " of them." : "";
    var conversationUrl = byId("panel-knowledge-gaps").dataset.conversationUrl;
    fillTable(
      byId("table-knowledge-gaps"),
      null,
      (data.groups || []).map(function (group) {
        var languages = Object.keys(group.languages || {})
          .map(function (language) {
            return language + " " + formatCount(group.languages[language]);
          })
          .join(", ");
        var examples = (group.examples || []).map(function (example) {
          var text = example.question || "–";
          var item = conversationUrl
            ? el("a", {
                href:
                  conversationUrl.replace("/0/", "/" + encodeURIComponent(example.conversation_id) + "/") +
                  "#answer-" +
                  encodeURIComponent(example.message_id),
                title: "Open the conversation at this answer",
                text: text,
              })
            : document.createTextNode(text);
          return el("li", {}, [item]);
        });
        var about = group.topic || "(no telling word)";
        return el("tr", { "data-topic": group.topic, "data-questions": group.questions }, [
          el("td", {}, [
            about,
            el("span", {
              className: "analytics-quiet",
              text: (group.words || []).length ? "with " + group.words.join(", ") : (group.profiles || []).join(", "),
            }),
          ]),
          numCell(group.questions, formatCount(group.questions)),
          cell(languages || "–"),
          el("td", {}, [el("ul", { className: "analytics-gap-examples" }, examples)]),
        ]);
      }),
      EMPTY_GAPS,
    );
  }

  function drawFeedbackRecent(rows) {
    var panel = byId("panel-feedback");
    var conversationUrl = panel.dataset.conversationUrl;
    fillTable(
      byId("table-feedback-recent"),
      null,
      rows.map(function (row) {
        var when = formatWhen(row.answered_at);
        var whenCell = conversationUrl
          ? el("td", {}, [
              el("a", {
                href:
                  conversationUrl.replace("/0/", "/" + encodeURIComponent(row.conversation_id) + "/") +
                  "#answer-" +
                  encodeURIComponent(row.message_id),
                className: "analytics-rating-link",
                title: "Open the conversation at this answer",
                text: when,
              }),
            ])
          : cell(when);
        var route = row.intent
          ? [row.intent, el("span", { className: "analytics-quiet", text: "→ " + (row.agent || "–") + " · " + (METHOD_LABELS[row.method] || humanise(row.method || "")) })]
          : ["–", el("span", { className: "analytics-quiet", text: "answered by " + (row.agent || "–") })];
        var version = row.routing_version ? "v" + row.routing_version : "draft";
        return el(
          "tr",
          {
            "data-rating-id": row.id,
            "data-conversation-id": row.conversation_id,
            "data-message-id": row.message_id,
            "data-answered-at": row.answered_at,
          },
          [
            whenCell,
            el("td", {}, [row.profile, el("span", { className: "analytics-quiet", text: row.tenant + " · " + version })]),
            cell(row.question || "–"),
            cell(row.answer || "–"),
            cell(row.comment || "(no comment)", { className: row.comment ? "" : "analytics-muted" }),
            el("td", {}, route),
          ],
        );
      }),
      "No answer of this period was rated down",
    );
  }

  // --- outcomes, routing accuracy and response quality ------------------------------------------------

  var EMPTY_OUTCOMES = "No conversation ended in this period";
  var OUTCOME_SERIES = [
    { key: "resolved", name: "Resolved", color: "#2e7d32" },
    { key: "escalated", name: "Handed to a person", color: "#1565c0" },
    { key: "abandoned", name: "Abandoned", color: "#9e9e9e" },
  ];

  function drawOutcomes(data) {
    var total = data.total || {};
    setFigure("outcomes-decided", total.decided, formatCount(total.decided));
    OUTCOME_SERIES.forEach(function (side) {
      setFigure("outcomes-" + side.key, total[side.key], formatCount(total[side.key]));
      var rate = total[side.key + "_percentage"];
      setFigure("outcomes-" + side.key + "-rate", rate, formatPercent(rate));
    });
    setFigure("outcomes-csat", total.csat_percentage, formatPercent(total.csat_percentage));
    setFigure("outcomes-up", total.up, formatCount(total.up));
    setFigure("outcomes-rated", total.rated, formatCount(total.rated));
    recordsTable(
      "table-outcomes-profiles",
      data.groups || [],
      [
        { key: "group" },
        { key: "decided", numeric: true, format: formatCount },
        { key: "resolved_percentage", numeric: true, format: formatPercent },
        { key: "escalated_percentage", numeric: true, format: formatPercent },
        { key: "abandoned_percentage", numeric: true, format: formatPercent },
        { key: "csat_percentage", numeric: true, format: formatPercent },
      ],
      EMPTY_OUTCOMES,
    );
  }

  function drawOutcomesTimeline(rows, bucket) {
    byId("outcomes-unit").textContent =
      bucket === "hour"
        ? "(conversations resolved, handed to a person or abandoned, per hour of the decision, UTC)"
        : "(conversations resolved, handed to a person or abandoned, per day of the decision, UTC)";
    var decided = rows.reduce(function (sum, row) {
      return sum + (row.decided || 0);
    }, 0);
    if (!decided) {
      chartShow("chart-outcomes", null, EMPTY_OUTCOMES);
      return;
    }
    chartShow("chart-outcomes", {
      textStyle: TEXT_STYLE,
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
      legend: { top: 0 },
      grid: { left: 48, right: 16, top: 36, bottom: 32 },
      xAxis: { type: "time" },
      yAxis: { type: "value", name: "conversations", minInterval: 1 },
      series: OUTCOME_SERIES.map(function (side) {
        return {
          name: side.name,
          type: "bar",
          stack: "outcomes",
          barMaxWidth: 28,
          itemStyle: { color: side.color },
          emphasis: { focus: "series" },
          data: rows.map(function (row) {
            return [row.period, row[side.key] || 0];
          }),
        };
      }),
    });
  }

  function drawQuality(data) {
    var accuracy = data.routing_accuracy || {};
    var tests = accuracy.tests || {};
    var corrections = accuracy.corrections || {};
    var ratings = accuracy.ratings || {};
    setFigure("quality-tests-accuracy", tests.accuracy_percentage, formatPercent(tests.accuracy_percentage));
    setFigure("quality-tests-total", tests.total, formatCount(tests.total));
    setFigure(
      "quality-corrections-accuracy",
      corrections.accuracy_percentage,
      formatPercent(corrections.accuracy_percentage),
    );
    setFigure("quality-corrections-reviewed", corrections.reviewed, formatCount(corrections.reviewed));
    setFigure("quality-corrections-corrected", corrections.corrected, formatCount(corrections.corrected));
    setFigure("quality-ratings-accuracy", ratings.accuracy_percentage, formatPercent(ratings.accuracy_percentage));
    setFigure("quality-ratings-rated", ratings.rated, formatCount(ratings.rated));
    var agents = data.agents || [];
    var profiles = {};
    agents.forEach(function (row) {
      profiles[row.profile] = true;
    });
    var qualify = Object.keys(profiles).length > 1; // agents are named within their profile
    recordsTable(
      "table-quality-agents",
      agents,
      [
        {
          key: "agent",
          format: function (value, record) {
            var name = value === "" || value == null ? "(none)" : String(value);
            return qualify ? record.profile + " · " + name : name;
          },
        },
        { key: "answers", numeric: true, format: formatCount },
        { key: "judge_mean", numeric: true, format: formatNumber },
        { key: "rated", numeric: true, format: formatCount },
        { key: "up_percentage", numeric: true, format: formatPercent },
        { key: "escalations", numeric: true, format: formatCount },
      ],
      "No answer in this period",
    );
  }

  // --- rollouts by profile ---------------------------------------------------------------------------

  var ACTIVE_PLAN_STATUSES = ["running", "paused", "ready"];

  function planRow(plan, rolloutUrl) {
    var active = plan.status === "running" || plan.status === "paused";
    return el("tr", { "data-plan-id": plan.id, "data-status": plan.status }, [
      el("td", {}, [el("a", { href: rolloutUrl.replace("/0/", "/" + encodeURIComponent(plan.id) + "/"), text: plan.name })]),
      cell(
        plan.target === "version"
          ? "version " + (plan.candidate == null ? "?" : plan.candidate) + " against version " + (plan.control == null ? "?" : plan.control)
          : "the multi-agent mode",
      ),
      el("td", {}, [el("span", { className: "rollout-status rollout-status-" + plan.status, text: plan.status_label })]),
      // Stages are counted from 1, as everywhere else; the API's own words for it when it gives them.
      numCell(plan.stage + 1, plan.stage_label || "stage " + (plan.stage + 1) + " of " + plan.stages.length),
      numCell(active ? plan.percentage : null, active ? plan.percentage + " % of new conversations" : "–"),
      cell(formatWhen(plan.started_at)),
      cell(formatWhen(plan.finished_at)),
    ]);
  }

  function drawRollouts(plans, profile) {
    var root = byId("rollouts-by-profile");
    var rolloutUrl = byId("panel-rollouts").dataset.rolloutUrl;
    var groups = {};
    var order = [];
    plans.forEach(function (plan) {
      var name = plan.profile || "";
      if (profile && name !== profile) {
        return;
      }
      if (!groups[name]) {
        groups[name] = { active: [], ended: [] };
        order.push(name);
      }
      (ACTIVE_PLAN_STATUSES.indexOf(plan.status) >= 0 ? groups[name].active : groups[name].ended).push(plan);
    });
    order.sort(function (a, b) {
      return (a === "") - (b === "") || a.localeCompare(b); // the plans of every profile (the multi-agent mode) last
    });
    if (!order.length) {
      root.replaceChildren(
        el("p", { className: "analytics-note", text: profile ? "No rollout plan for this profile yet." : "No rollout plan yet." }),
      );
      return;
    }
    root.replaceChildren.apply(
      root,
      order.map(function (name) {
        var shown = groups[name].active.concat(groups[name].ended.slice(0, ENDED_PLANS_SHOWN)); // the API lists newest first
        var table = el("table", { className: "analytics-rollout-table" }, [
          el("thead", {}, [
            el(
              "tr",
              {},
              ["Plan", "Rolls out", "Status", "Stage", "Share now", "Started (UTC)", "Ended (UTC)"].map(function (label, index) {
                return el("th", { scope: "col", className: index === 3 || index === 4 ? "num" : "", text: label });
              }),
            ),
          ]),
          el("tbody", {}, shown.map(function (plan) {
            return planRow(plan, rolloutUrl);
          })),
        ]);
        return el("div", { className: "analytics-rollout-profile", "data-profile": name }, [
          el("h3", { text: name || "Every profile (the multi-agent mode)" }),
          table,
        ]);
      }),
    );
  }

  // --- filters ------------------------------------------------------------------------------------------

  function filtersFromUrl() {
    var params = new URLSearchParams(window.location.search);
    var start = params.get("start") || "";
    var end = params.get("end") || "";
    return {
      days: start || end ? "" : params.get("days") || DEFAULT_DAYS,
      start: start,
      end: end,
      profile: params.get("profile") || "",
      tenant: params.get("tenant") || "",
      cohort: params.get("cohort") || "",
      version: params.get("version") || "",
      bucket: params.get("bucket") || "",
    };
  }

  function filtersToForm(filters) {
    byId("filter-days").value = filters.days;
    byId("filter-start").value = filters.start;
    byId("filter-end").value = filters.end;
    byId("filter-profile").value = filters.profile;
    if (byId("filter-tenant")) {
      byId("filter-tenant").value = filters.tenant;
    }
    byId("filter-cohort").value = filters.cohort;
    byId("filter-version").value = filters.version;
    byId("filter-bucket").value = filters.bucket;
    form.querySelectorAll(".analytics-preset").forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.dataset.days === filters.days));
    });
  }

  function filtersFromForm() {
    var start = byId("filter-start").value;
    var end = byId("filter-end").value;
    return {
      days: start || end ? "" : byId("filter-days").value || DEFAULT_DAYS,
      start: start,
      end: end,
      profile: byId("filter-profile").value,
      tenant: byId("filter-tenant") ? byId("filter-tenant").value : "",
      cohort: byId("filter-cohort").value,
      version: byId("filter-version").value,
      bucket: byId("filter-bucket").value,
    };
  }

  // The API takes either days or start/end, never both; empty parameters are left out.
  function apiParams(filters) {
    var params = new URLSearchParams();
    ["days", "start", "end", "profile", "tenant", "cohort", "version"].forEach(function (name) {
      if (filters[name]) {
        params.set(name, filters[name]);
      }
    });
    return params;
  }

  function rangeDays(filters) {
    if (filters.days) {
      return Number(filters.days);
    }
    var end = filters.end ? new Date(filters.end + "T00:00:00Z") : new Date();
    var start = filters.start ? new Date(filters.start + "T00:00:00Z") : new Date(end.getTime() - 29 * 864e5);
    return Math.round((end - start) / 864e5) + 1;
  }

  function bucketFor(filters) {
    return filters.bucket || (rangeDays(filters) <= HOUR_BUCKET_MAX_DAYS ? "hour" : "day");
  }

  function describePeriod(filters) {
    var scope = [filters.profile ? "profile " + filters.profile : "all profiles"];
    if (byId("filter-tenant")) {
      scope.push(filters.tenant ? "tenant " + filters.tenant : "all tenants");
    }
    if (filters.cohort) {
      scope.push(filters.cohort === "none" ? "turns the rollout flag did not decide" : "the " + filters.cohort + " cohort");
    }
    if (filters.version) {
      scope.push(filters.version === "draft" ? "turns served by no published version (drafts)" : "routing version " + filters.version);
    }
    var period = filters.days
      ? "the last " + filters.days + " days (today included, UTC)"
      : (filters.start || "…") + " to " + (filters.end || "today") + " (UTC, both days included)";
    return "Showing " + period + " for " + scope.join(" and ") + ".";
  }

  // --- loading ------------------------------------------------------------------------------------------

  function apiError(response, body) {
    var message = body && body.error && body.error.message ? body.error.message : response.statusText;
    var fields = body && body.error && body.error.fields ? body.error.fields : {};
    var details = Object.keys(fields).map(function (name) {
      return name + ": " + fields[name].join(" ");
    });
    var error = new Error("HTTP " + response.status + ": " + message + (details.length ? " (" + details.join("; ") + ")" : ""));
    error.status = response.status;
    return error;
  }

  function fetchJson(path, params) {
    var query = params.toString();
    return fetch(API + path + (query ? "?" + query : ""), {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    }).then(function (response) {
      return response
        .json()
        .catch(function () {
          return null;
        })
        .then(function (body) {
          if (!response.ok) {
            throw apiError(response, body);
          }
          return body;
        });
    });
  }

  function showError(message) {
    var note = byId("analytics-error");
    note.textContent = "Some figures could not be loaded: " + message + ".";
    note.hidden = false;
  }

  function load(filters) {
    var serial = ++loadSerial;
    var params = apiParams(filters);
    var bucket = bucketFor(filters);
    var timelineParams = new URLSearchParams(params);
    timelineParams.set("bucket", bucket);
    var recentParams = new URLSearchParams(params);
    recentParams.set("limit", String(RECENT_LIMIT));
    var ratedDownParams = new URLSearchParams(params);
    ratedDownParams.set("limit", String(RATED_DOWN_LIMIT));

    root.dataset.state = "loading";
    root.setAttribute("aria-busy", "true");
    byId("analytics-error").hidden = true;
    byId("analytics-period").textContent = describePeriod(filters);

    // Each answer is drawn as it arrives; one that fails leaves the others standing and names itself.
    var sections = [
      ["handoffs", ENDPOINTS.handoffs, params, drawHandoffs],
      ["timeline", ENDPOINTS.timeline, timelineParams, function (data) {
        drawTimeline(data, bucket);
      }],
      ["agents", ENDPOINTS.agents, params, drawAgents],
      ["routing methods", ENDPOINTS.methods, params, drawMethods],
      ["cohorts", ENDPOINTS.cohorts, params, drawCohorts],
      ["languages", ENDPOINTS.languages, params, drawLanguages],
      ["loop stops", ENDPOINTS.loopStops, params, drawLoopStops],
      ["delegations", ENDPOINTS.delegations, params, drawDelegations],
      ["tools", ENDPOINTS.tools, params, drawTools],
      ["goals", ENDPOINTS.goals, params, drawGoals],
      ["usage", ENDPOINTS.usage, params, drawUsage],
      ["recent handoffs", ENDPOINTS.recent, recentParams, function (data) {
        drawRecent(data, root.dataset.conversationUrl);
      }],
      ["ratings", ENDPOINTS.feedback, params, drawFeedback],
      ["ratings over time", ENDPOINTS.feedbackTimeline, timelineParams, function (data) {
        drawFeedbackTimeline(data, bucket);
      }],
      ["ratings per profile, intent and agent", ENDPOINTS.feedbackBreakdown, params, drawFeedbackBreakdown],
      ["answers rated down", ENDPOINTS.feedbackRecent, ratedDownParams, drawFeedbackRecent],
      ["knowledge gaps", ENDPOINTS.knowledgeGaps, params, drawKnowledgeGaps],
      ["outcomes", ENDPOINTS.outcomes, params, drawOutcomes],
      ["outcomes over time", ENDPOINTS.outcomesTimeline, timelineParams, function (data) {
        drawOutcomesTimeline(data, bucket);
      }],
      ["routing accuracy and response quality", ENDPOINTS.quality, params, drawQuality],
    ];
    // Rollout plans span tenants and periods: the section (shown to those who may read plans) follows the
    // profile filter only.
    if (byId("panel-rollouts")) {
      sections.push(["rollouts", ENDPOINTS.rollouts, new URLSearchParams(), function (data) {
        drawRollouts(data, filters.profile);
      }]);
    }
    var failures = [];
    return Promise.all(
      sections.map(function (section) {
        return fetchJson(section[1], section[2])
          .then(function (data) {
            if (serial === loadSerial) {
              section[3](data);
            }
          })
          .catch(function (error) {
            failures.push(section[0] + " (" + error.message + ")");
          });
      }),
    ).then(function () {
      if (serial !== loadSerial) {
        return; // a newer filter change is on its way
      }
      root.dataset.query = params.toString();
      root.dataset.bucket = bucket;
      root.removeAttribute("aria-busy");
      if (failures.length) {
        showError(failures.join("; "));
        root.dataset.state = "error";
      } else {
        root.dataset.state = "ready";
      }
    });
  }

  function apply(filters, push) {
    filtersToForm(filters);
    var query = apiParams(filters);
    if (filters.bucket) {
      query.set("bucket", filters.bucket);
    }
    var url = window.location.pathname + (query.toString() ? "?" + query.toString() : "");
    if (push) {
      window.history.pushState(null, "", url);
    }
    return load(filters);
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    apply(filtersFromForm(), true);
  });
  form.querySelectorAll(".analytics-preset").forEach(function (button) {
    button.addEventListener("click", function () {
      byId("filter-start").value = "";
      byId("filter-end").value = "";
      byId("filter-days").value = button.dataset.days;
      apply(filtersFromForm(), true);
    });
  });
  ["filter-profile", "filter-tenant", "filter-bucket"].forEach(function (id) {
    if (byId(id)) {
      byId(id).addEventListener("change", function () {
        apply(filtersFromForm(), true);
      });
    }
  });
  window.addEventListener("popstate", function () {
    apply(filtersFromUrl(), false);
  });
  // The admin's theme toggle switches data-theme on <html>: redraw the charts in the new colours.
  new MutationObserver(function () {
    Object.keys(charts).forEach(function (id) {
      charts[id].dispose();
      delete charts[id];
      chartShow(id, shownOptions[id], "");
    });
  }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (id) {
      charts[id].resize();
    });
  });

  apply(filtersFromUrl(), false);
})();
