/* The chat page: the WebSocket chat (/ws/chat/<agent_id>/<session_id>/?tenant=<slug>&route=<route>&version=<v>)
 * with the staff session, each event of a turn drawn as it arrives (common/events.py). Plain DOM, no framework;
 * every text the server sends is set with textContent, never parsed as HTML.
 *
 * The Version picker (only for users who may try drafts): Live or the profile's Draft; a tenant whose drafts this
 * user may not try (its option's data-drafts) offers Live only. Switching starts a new conversation, and the draft
 * shows its marker above the transcript; each answer keeps the version it says it came from (data-version).
 *
 * Goal mode: the goal event shows the goal and entities read and the plan's steps, each step then
 * updated by its plan_step events; a clarification's candidates are buttons that send the candidate's number.
 *
 * The conversation's open flows: a finished answer whose metadata.conversation says the message moved a flow
 * (pushed under a side question, resumed, bound, cancelled, queued …; docs/routing.md), read as a repair, held
 * several requests, or left flows open, gets a line saying so, with the flows open after it, the next reply's first.
 *
 * Feedback: each finished answer (its done event names the stored message, message_id) gets 👍/👎 buttons that
 * POST /api/sessions/<conversation_key>/feedback with this session's CSRF token; the chosen one shows pressed
 * (aria-pressed), choosing again replaces the rating, and a refusal is shown under the answer.
 *
 * People in the loop: a turn that hands the conversation to a person says so (its escalation event, and the
 * answer's metadata.escalation: the queue and the place in it); between turns the socket brings what people do — a
 * person's reply ({"type": "human"}, with the author's name) and the escalation taken, transferred or handed back
 * ({"type": "escalation"}, with the notice the customer reads). While a person holds the conversation a message gets
 * no answer from the assistants: the person answers on the desk. */
"use strict";

(function () {
  const root = document.getElementById("content-main");
  const profileSelect = document.getElementById("chat-profile");
  const tenantSelect = document.getElementById("chat-tenant");
  const routeSelect = document.getElementById("chat-route");
  const versionSelect = document.getElementById("chat-version"); // null: this user may not try drafts
  const draftMarker = document.getElementById("chat-draft-marker");
  const sessionInput = document.getElementById("chat-session");
  const connection = document.getElementById("chat-connection");
  const current = document.getElementById("chat-current-agent");
  const log = document.getElementById("chat-log");
  const errorBox = document.getElementById("chat-error");
  const form = document.getElementById("chat-form");
  const input = document.getElementById("chat-input");
  const userInput = document.getElementById("chat-user");
  const contextInput = document.getElementById("chat-context");
  const csrfInput = document.querySelector("#chat-form [name=csrfmiddlewaretoken]");

  let socket = null;
  let waiting = []; // frames typed before the socket opened
  let turns = []; // turns sent and not finished yet, oldest first: events belong to turns[0]
  let answering = null; // {agent, display_name} of the agent answering now
  const displayNames = {};

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function newSessionId() {
    if (window.crypto && crypto.randomUUID) return "chat-" + crypto.randomUUID().replaceAll("-", "");
    return "chat-" + Date.now().toString(16) + Math.random().toString(16).slice(2);
  }

  function agentLabel(agent, displayName) {
    const name = displayName || displayNames[agent];
    return name && name !== agent ? name + " (" + agent + ")" : agent;
  }

  function scroll() {
    log.scrollTop = log.scrollHeight;
  }

  function setConnection(state, text) {
    connection.dataset.state = state;
    connection.textContent = text;
  }

  function showError(message) {
    errorBox.textContent = message;
    errorBox.hidden = false;
  }

  function errorText(event) {
    const error = event.error || {};
    const fields = error.fields || {};
    const details = Object.keys(fields).map((name) => name + ": " + [].concat(fields[name]).join(" "));
    return (error.message || "Error") + (details.length ? " (" + details.join("; ") + ")" : "");
  }

  // -- which version -------------------------------------------------------------------------------------

  function tenantTakesDrafts() {
    const option = tenantSelect.selectedOptions[0];
    return Boolean(option && option.dataset.drafts === "true");
  }

  function version() {
    return versionSelect ? versionSelect.value : "live";
  }

  function showVersion() {
    if (versionSelect) {
      const draft = versionSelect.querySelector("option[value=draft]");
      draft.disabled = !tenantTakesDrafts();
      if (draft.disabled && versionSelect.value === "draft") versionSelect.value = "live";
    }
    root.dataset.version = version();
    draftMarker.hidden = version() !== "draft";
  }

  // -- the socket ----------------------------------------------------------------------------------------

  function connect() {
    if (socket) {
      socket.onclose = null;
      socket.close();
    }
    turns.forEach((turn) => finish(turn, "closed"));
    turns = [];
    const profile = profileSelect.value;
    const tenant = tenantSelect.value;
    if (!profile || !tenant) {
      setConnection("closed", "Pick a profile and a tenant");
      return;
    }
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const url =
      scheme + "//" + location.host + "/ws/chat/" + encodeURIComponent(profile) + "/" +
      encodeURIComponent(sessionInput.value) + "/?tenant=" + encodeURIComponent(tenant) +
      "&route=" + encodeURIComponent(routeSelect.value) + "&version=" + encodeURIComponent(version());
    setConnection("connecting", "Connecting…");
    const ws = new WebSocket(url);
    socket = ws;
    ws.onopen = () => {
      setConnection("open", "Connected as staff for " + tenant + (version() === "draft" ? ", trying the draft" : ""));
      waiting.forEach((frame) => ws.send(frame));
      waiting = [];
    };
    ws.onmessage = (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch (error) {
        showError("The server sent a frame that is not JSON.");
        return;
      }
      handle(event);
    };
    ws.onclose = (close) => {
      if (socket !== ws) return;
      socket = null;
      setConnection("closed", "Disconnected" + (close.code >= 4000 ? " (" + close.code + ")" : ""));
      turns.forEach((turn) => finish(turn, "closed"));
      turns = [];
      root.dataset.state = "idle";
    };
  }

  function restart() {
    showVersion();
    sessionInput.value = newSessionId();
    log.replaceChildren();
    errorBox.hidden = true;
    answering = null;
    current.textContent = "—";
    current.dataset.agent = "";
    root.dataset.state = "idle";
    waiting = [];
    connect();
  }

  function send(text) {
    const message = { text: text };
    if (userInput.value.trim()) message.user_id = userInput.value.trim();
    if (contextInput.value.trim()) {
      try {
        message.context = JSON.parse(contextInput.value);
      } catch (error) {
        showError("The context is not valid JSON: " + error.message);
        return false;
      }
    }
    const frame = JSON.stringify(message);
    // An earlier question's choices are stale once anything else is said.
    log.querySelectorAll("button.chat-choice").forEach((button) => (button.disabled = true));
    const turn = { element: el("div", "chat-turn"), answer: null, goal: null, choices: null };
    turn.element.dataset.state = "waiting";
    turn.element.append(el("div", "chat-user", text));
    log.append(turn.element);
    turns.push(turn);
    root.dataset.state = "streaming";
    errorBox.hidden = true;
    scroll();
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(frame);
    } else {
      waiting.push(frame);
      if (!socket) connect();
    }
    return true;
  }

  function finish(turn, state) {
    turn.element.dataset.state = state;
    if (turn.answer && turn.answer.dataset.state === "streaming") turn.answer.dataset.state = state;
  }

  // -- a turn's events -----------------------------------------------------------------------------------

  function note(turn, className, text) {
    const line = el("p", "chat-note " + className, text);
    turn.element.append(line);
    return line;
  }

  function answerBlock(turn, agent) {
    if (!turn.answer || turn.answer.dataset.agent !== agent || turn.answer.dataset.state !== "streaming") {
      const block = el("div", "chat-answer");
      block.dataset.agent = agent;
      block.dataset.state = "streaming";
      block.append(el("span", "chat-answer-agent", agentLabel(agent)), el("span", "chat-answer-text", ""));
      turn.element.append(block);
      turn.answer = block;
    }
    return turn.answer;
  }

  // -- people in the loop -------------------------------------------------------------------------------

  function escalationText(escalation) {
    if (escalation.status === "queued") {
      return "Waiting for a person: " + escalation.queue + " queue, number " + (escalation.position || "?");
    }
    if (escalation.status === "assigned") return "With " + (escalation.person || "a person");
    if (escalation.status === "returned") return "Back with the assistants";
    return "The conversation with people ended";
  }

  function showPerson(escalation) {
    if (escalation.status === "assigned" && escalation.person) {
      current.textContent = escalation.person + " (person)";
      current.dataset.agent = "human";
    } else if (escalation.status === "returned" || escalation.status === "closed") {
      current.textContent = "—";
      current.dataset.agent = "";
      answering = null;
    }
  }

  // What people do, between turns: a person's reply, the escalation's changes (each once: a push may repeat).
  function pushed(event) {
    if (event.type === "human") {
      const message = event.message || {};
      if (log.querySelector('.chat-human[data-message-id="' + message.id + '"]')) return;
      const author = (message.author && message.author.name) || "A person";
      const block = el("div", "chat-human");
      block.dataset.messageId = String(message.id);
      block.dataset.author = author;
      block.append(el("span", "chat-human-author", author + " (person)"), el("span", "chat-human-text", message.content));
      log.append(block);
      current.textContent = author + " (person)";
      current.dataset.agent = "human";
      return;
    }
    const escalation = event.escalation || {};
    const line = el("p", "chat-note chat-escalation", event.notice || escalationText(escalation));
    line.dataset.status = escalation.status || "";
    line.dataset.escalation = escalation.id || "";
    line.title = escalationText(escalation);
    log.append(line);
    showPerson(escalation);
  }

  const handlers = {
    escalation(turn, event) {
      const line = note(turn, "chat-escalation", escalationText(event));
      line.dataset.status = event.status || "";
      line.dataset.escalation = event.id || "";
      showPerson(event);
    },
    route(turn, event) {
      const how = [event.method, event.intent && "intent " + event.intent].filter(Boolean).join(", ");
      const line = note(turn, "chat-route", "Routed to " + (event.agent || event.route) + (how ? " (" + how + ")" : ""));
      line.dataset.agent = event.agent || "";
      if (event.reason) line.title = event.reason;
    },
    agent(turn, event) {
      displayNames[event.agent] = event.display_name || event.agent;
      if (answering && answering.agent !== event.agent) {
        const marker = note(
          turn,
          "chat-switch",
          "⇄ " + agentLabel(answering.agent) + " → " + agentLabel(event.agent) + " (" + event.via + ")"
        );
        marker.dataset.from = answering.agent;
        marker.dataset.to = event.agent;
      } else {
        note(turn, "chat-agent", agentLabel(event.agent) + " answering (" + event.via + ")").dataset.agent = event.agent;
      }
      answering = { agent: event.agent, display_name: event.display_name };
      current.textContent = agentLabel(event.agent);
      current.dataset.agent = event.agent;
      current.dataset.displayName = event.display_name || "";
      if (turn.answer && turn.answer.dataset.state === "streaming") turn.answer = null;
    },
    handoff(turn, event) {
      const line = note(turn, "chat-move", event.from_agent + " → " + event.to_agent + " (" + event.kind + ")");
      line.dataset.kind = event.kind;
      if (event.reason) line.title = event.reason;
    },
    tool_call(turn, event) {
      if (event.phase === "started") {
        const block = el("details", "chat-tool");
        block.dataset.tool = event.tool;
        block.dataset.agent = event.agent;
        block.dataset.status = "running";
        block.append(el("summary", "", "Tool " + event.tool + " — running"));
        const body = el("ul", "chat-tool-body");
        body.append(el("li", "", "agent: " + agentLabel(event.agent)));
        body.append(el("li", "", "server: " + event.server));
        body.append(el("li", "chat-tool-started", "started"));
        block.append(body);
        turn.element.append(block);
        return;
      }
      const running = [...turn.element.querySelectorAll("details.chat-tool[data-status=running]")].filter(
        (block) => block.dataset.tool === event.tool && block.dataset.agent === event.agent
      );
      const block = running[0];
      if (!block) return;
      block.dataset.status = event.status;
      block.dataset.latencyMs = event.latency_ms;
      block.querySelector("summary").textContent =
        "Tool " + event.tool + " — " + event.status + ", " + event.latency_ms + " ms";
      block.querySelector("ul").append(
        el("li", "chat-tool-finished", "finished: " + event.status + " in " + event.latency_ms + " ms")
      );
    },
    token(turn, event) {
      const block = answerBlock(turn, event.agent);
      block.querySelector(".chat-answer-text").textContent += event.text;
      block.dataset.tokens = (Number(block.dataset.tokens) || 0) + 1;
    },
    discard(turn, event) {
      if (turn.answer && turn.answer.dataset.agent === event.agent && turn.answer.dataset.state === "streaming") {
        turn.answer.remove();
        turn.answer = null;
      }
      note(turn, "chat-discard", agentLabel(event.agent) + " passed the conversation on");
    },
    goal(turn, event) {
      if (event.phase === "finished") {
        if (turn.goal) turn.goal.dataset.status = event.status || "";
        return;
      }
      goalBlock(turn, event);
      if (event.clarification) choicesShow(turn, event.clarification);
    },
    plan_step(turn, event) {
      const step = planStep(turn, event);
      step.dataset.status = event.status;
      const timed = event.latency_ms !== undefined && event.status !== "skipped"; // a skipped step made no call
      if (timed) step.dataset.latencyMs = event.latency_ms;
      step.querySelector(".chat-plan-status").textContent =
        event.status + (timed ? ", " + Math.round(event.latency_ms) + " ms" : "");
      if (event.explanation) step.title = event.explanation;
    },
    partial(turn, event) {
      const block = el("details", "chat-partial");
      block.dataset.agent = event.agent;
      block.append(el("summary", "", agentLabel(event.agent) + " finished (" + event.status + ")"));
      block.append(el("div", "chat-partial-answer", event.answer || ""));
      turn.element.append(block);
      turn.answer = null;
    },
    done(turn, event) {
      const escalation = (event.metadata || {}).escalation;
      if (!event.answer && escalation) {
        // A person holds the conversation: nobody answers now, the person writes on the desk.
        if (turn.answer && turn.answer.dataset.state === "streaming") turn.answer.remove();
        turn.answer = null;
        turn.element.dataset.state = "done";
        turn.element.dataset.escalation = escalation.status;
        return;
      }
      let block = turn.answer;
      if (!block || block.dataset.state !== "streaming") block = answerBlock(turn, event.agent);
      block.dataset.agent = event.agent;
      block.querySelector(".chat-answer-agent").textContent = agentLabel(event.agent);
      const streamed = block.querySelector(".chat-answer-text").textContent;
      // "complete": the tokens spelled out the final answer; "revised": guardrails or review changed it.
      block.dataset.streamed = streamed === event.answer ? "complete" : "revised";
      block.querySelector(".chat-answer-text").textContent = event.answer;
      block.dataset.state = "done";
      block.dataset.conversationKey = event.conversation_key;
      const answered = (event.metadata || {}).version;
      block.dataset.version = answered === null || answered === undefined ? "" : String(answered);
      if (!answering || answering.agent !== event.agent) {
        answering = { agent: event.agent, display_name: displayNames[event.agent] };
      }
      current.textContent = agentLabel(event.agent);
      current.dataset.agent = event.agent;
      turn.element.dataset.state = "done";
      if (escalation) {
        block.dataset.escalation = escalation.status;
        block.dataset.queue = escalation.queue || "";
        if (escalation.position) block.dataset.position = String(escalation.position);
      }
      stackNote(turn, (event.metadata || {}).conversation);
      if (event.message_id) feedbackBar(block, event.conversation_key, event.message_id);
      const goal = (event.metadata || {}).goal;
      if (goal && goal.clarification) choicesShow(turn, goal.clarification);
      if (goal && turn.goal) turn.goal.dataset.status = goal.status || "";
    },
  };

  // -- the conversation's open flows ---------------------------------------------------------------------

  function stackNote(turn, conversation) {
    if (!conversation) return;
    const events = Array.isArray(conversation.events) ? conversation.events : [];
    const parts = events.map((event) => {
      const frame = event.frame || {};
      return event.event + " " + (frame.name || frame.kind || "") + (event.by ? " (" + event.by + ")" : "");
    });
    if (conversation.repair) parts.push("repair: " + conversation.repair);
    const topics = Array.isArray(conversation.topics) ? conversation.topics : [];
    if (topics.length > 1) {
      parts.push(topics.length + " requests: " + topics.map((topic) => topic.intent + " " + topic.status).join(", "));
    }
    const open = (Array.isArray(conversation.stack) ? conversation.stack : []).map((frame) => frame.name).reverse();
    if (!parts.length && !open.length) return;
    const line = note(
      turn,
      "chat-stack",
      "Flows: " + (parts.join("; ") || "nothing moved") + (open.length ? " · open: " + open.join(", ") : "")
    );
    line.dataset.events = events.map((event) => event.event).join(" ");
  }

  // -- feedback on an answer ----------------------------------------------------------------------------

  const RATINGS = [
    ["up", "👍", "Helpful"],
    ["down", "👎", "Not helpful"],
  ];

  function feedbackBar(block, conversationKey, messageId) {
    const bar = el("div", "chat-feedback");
    bar.dataset.messageId = String(messageId);
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-label", "Rate this answer");
    RATINGS.forEach(([rating, symbol, label]) => {
      const button = el("button", "chat-feedback-button");
      button.append(el("span", "chat-feedback-symbol", symbol), el("span", "chat-feedback-label", label));
      button.type = "button";
      button.dataset.rating = rating;
      button.title = label;
      button.setAttribute("aria-label", label);
      button.setAttribute("aria-pressed", "false");
      button.addEventListener("click", () => rate(bar, conversationKey, messageId, rating));
      bar.append(button);
    });
    const status = el("span", "chat-feedback-status", "");
    status.setAttribute("role", "status");
    bar.append(status);
    block.append(bar);
  }

  async function rate(bar, conversationKey, messageId, rating) {
    const buttons = bar.querySelectorAll("button.chat-feedback-button");
    const status = bar.querySelector(".chat-feedback-status");
    buttons.forEach((button) => (button.disabled = true));
    bar.dataset.state = "sending";
    let failure = null;
    try {
      const response = await fetch("/api/sessions/" + encodeURIComponent(conversationKey) + "/feedback", {
        method: "POST",
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json",
          "X-CSRFToken": csrfInput ? csrfInput.value : "",
        },
        body: JSON.stringify({ message_id: messageId, rating: rating }),
      });
      if (!response.ok) {
        let body = {};
        try {
          body = await response.json();
        } catch (error) {
          body = { error: { message: "The server answered " + response.status + "." } };
        }
        failure = errorText(body);
      }
    } catch (error) {
      failure = "The rating could not be sent: " + error.message;
    }
    buttons.forEach((button) => {
      button.disabled = false;
      if (!failure) button.setAttribute("aria-pressed", String(button.dataset.rating === rating));
    });
    if (failure) {
      bar.dataset.state = "error";
      status.textContent = failure;
      status.classList.add("errornote");
      return;
    }
    bar.dataset.state = "saved";
    bar.dataset.rating = rating;
    status.classList.remove("errornote");
    status.textContent = rating === "up" ? "Thanks: rated helpful." : "Thanks: rated not helpful.";
  }

  // -- goal mode -----------------------------------------------------------------------------------------

  function shown(value) {
    if (Array.isArray(value)) return value.map(shown).join(", ");
    if (value !== null && typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  function entitiesText(entities) {
    return Object.keys(entities || {})
      .filter((name) => ![null, undefined, "", false].includes(entities[name]) && shown(entities[name]) !== "")
      .map((name) => name + ": " + shown(entities[name]));
  }

  function goalBlock(turn, event) {
    const read = event.intent_output || {};
    const block = el("div", "chat-goal");
    block.dataset.status = event.status || "";
    block.dataset.goal = read.goal || "";
    const general = event.status === "general" || !read.goal;
    const heading = general
      ? ["no goal: the specialists answer"]
      : [read.goal].concat(entitiesText(read.entities));
    const title = el("p", "chat-goal-read");
    title.append(el("span", "chat-goal-label", "Goal "), el("span", "chat-goal-text", heading.join(" · ")));
    if (typeof read.confidence === "number") {
      title.append(el("span", "chat-goal-confidence", " (" + (read.primary_domain || "") + ", " +
        read.confidence.toFixed(2) + ")"));
    }
    block.append(title);
    const steps = (event.plan && event.plan.steps) || [];
    if (steps.length) {
      const list = el("ol", "chat-plan");
      block.append(list);
      steps.forEach((step) => planStep({ goal: block }, { ...step, status: "planned" }));
    }
    turn.element.append(block);
    turn.goal = block;
    return block;
  }

  function planStep(turn, event) {
    if (!turn.goal) goalBlock(turn, { status: "plan" });
    let list = turn.goal.querySelector("ol.chat-plan");
    if (!list) {
      list = el("ol", "chat-plan");
      turn.goal.append(list);
    }
    const id = String(event.id);
    let item = [...list.children].find((child) => child.dataset.step === id);
    if (!item) {
      item = el("li", "chat-plan-step");
      item.dataset.step = id;
      item.dataset.capability = event.capability || "";
      item.dataset.status = event.status || "planned";
      const name = (event.capability || "") + (event.kind ? " (" + event.kind + ")" : "");
      const after = (event.depends_on || []).length ? " after step " + event.depends_on.join(", ") : "";
      item.append(
        el("span", "chat-plan-capability", name),
        el("span", "chat-plan-after", after),
        el("span", "chat-plan-sep", " — "),
        el("span", "chat-plan-status", event.status || "planned")
      );
      if (event.required === false) item.dataset.optional = "true";
      list.append(item);
    }
    return item;
  }

  function choicesShow(turn, clarification) {
    const candidates = (clarification.candidates || []).filter((c) => c && typeof c === "object");
    if (!candidates.length || turn.choices) return;
    const box = el("div", "chat-choices");
    box.dataset.reason = clarification.reason || "";
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Choose one");
    candidates.forEach((candidate, index) => {
      const number = String(index + 1);
      const value = candidate.value === undefined || candidate.value === null ? "" : String(candidate.value);
      const label = candidate.label ? String(candidate.label) : value;
      const text = number + ". " + label + (value && value !== label ? " (" + value + ")" : "");
      const button = el("button", "button chat-choice", text);
      button.type = "button";
      button.dataset.number = number;
      button.dataset.value = value;
      button.addEventListener("click", () => {
        if (button.disabled) return;
        if (send(number)) button.dataset.chosen = "true";
      });
      box.append(button);
    });
    turn.element.append(box);
    turn.choices = box;
  }

  function handle(event) {
    if (event.type === "human" || (event.type === "escalation" && event.escalation)) {
      pushed(event);
      scroll();
      return;
    }
    const turn = turns[0];
    if (event.type === "error") {
      showError(errorText(event));
      if (turn) {
        note(turn, "chat-error-note errornote", errorText(event));
        finish(turn, "error");
        turns.shift();
      }
    } else if (turn && handlers[event.type]) {
      turn.element.dataset.state = "streaming";
      handlers[event.type](turn, event);
      if (event.type === "done") turns.shift();
    }
    if (!turns.length) root.dataset.state = "idle";
    scroll();
  }

  // -- the page ------------------------------------------------------------------------------------------

  profileSelect.addEventListener("change", restart);
  tenantSelect.addEventListener("change", restart);
  routeSelect.addEventListener("change", restart);
  if (versionSelect) versionSelect.addEventListener("change", restart); // a draft's conversation is not live's
  document.getElementById("chat-new").addEventListener("click", restart);
  form.addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    if (send(text)) input.value = "";
  });
  input.addEventListener("keydown", (key) => {
    if (key.key === "Enter" && !key.shiftKey) {
      key.preventDefault();
      form.requestSubmit();
    }
  });
  restart();
})();
