/* The desk page: the queues of the tenants this person answers for, the conversations they hold, and one
 * conversation opened, kept live over the desk socket (/ws/desk/, chat/desk_socket.py) with the staff session.
 * Plain DOM, no framework; every text the server sends is set with textContent, never parsed as HTML.
 *
 * The page's JSON (desk-state) is what the desk shows first; the socket's snapshot replaces it when it opens (and
 * whenever it opens again after a drop), and each desk event changes it: a conversation queued, taken, transferred,
 * handed back or closed, a message or a note. The places in line are counted here from the rows, as the server
 * counts them: per queue (tenant, profile, team), higher priority first, then first queued.
 *
 * Actions are frames {id, action, escalation, ...}; each is answered by a result or an error with the same id. */
"use strict";

(function () {
  const initial = JSON.parse(document.getElementById("desk-state").textContent);
  const userId = initial.user_id;
  const teamSelect = document.getElementById("desk-team");
  const connection = document.getElementById("desk-connection");
  const mineList = document.getElementById("desk-mine");
  const mineEmpty = document.getElementById("desk-mine-empty");
  const mineCount = document.getElementById("desk-mine-count");
  const queuesBox = document.getElementById("desk-queues");
  const queuesEmpty = document.getElementById("desk-queues-empty");
  const queueCount = document.getElementById("desk-queue-count");
  const view = document.getElementById("desk-conversation");
  const pick = document.getElementById("desk-pick");
  const title = document.getElementById("desk-title");
  const statusLine = document.getElementById("desk-status");
  const why = document.getElementById("desk-why");
  const summary = document.getElementById("desk-summary");
  const historyBox = document.getElementById("desk-history");
  const errorBox = document.getElementById("desk-error");
  const replyForm = document.getElementById("desk-reply-form");
  const replyInput = document.getElementById("desk-reply");
  const takeButton = document.getElementById("desk-take");
  const noteForm = document.getElementById("desk-note-form");
  const noteInput = document.getElementById("desk-note");
  const transferForm = document.getElementById("desk-transfer-form");
  const transferTeam = document.getElementById("desk-transfer-team");
  const transferPriority = document.getElementById("desk-transfer-priority");
  const transferNote = document.getElementById("desk-transfer-note");
  const handBackForm = document.getElementById("desk-hand-back-form");
  const handBackNote = document.getElementById("desk-hand-back-note");

  let reasons = initial.reasons || {};
  let priorities = initial.priorities || [];
  const waiting = new Map(); // escalation id -> desk row, queued
  const mine = new Map(); // escalation id -> desk row, held by this user
  let opened = null; // the opened conversation's detail (escalation_detail)
  let socket = null;
  let retry = 1000;
  let nextFrame = 1;
  const pending = new Map(); // frame id -> {resolve, reject}

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function errorText(event) {
    const error = event.error || {};
    const fields = error.fields || {};
    const details = Object.keys(fields)
      .filter((name) => [].concat(fields[name]).join(" ") !== error.message)
      .map((name) => name + ": " + [].concat(fields[name]).join(" "));
    return (error.message || "Error") + (details.length ? " (" + details.join("; ") + ")" : "");
  }

  function showError(message) {
    errorBox.textContent = message;
    errorBox.hidden = !message;
  }

  function setConnection(state, text) {
    connection.dataset.state = state;
    connection.textContent = text;
  }

  // -- the lists -----------------------------------------------------------------------------------------

  function waited(since) {
    const seconds = Math.max(0, (Date.now() - Date.parse(since)) / 1000);
    if (seconds < 60) return Math.floor(seconds) + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min";
    const hours = Math.floor(seconds / 3600);
    return hours + " h " + Math.floor((seconds % 3600) / 60) + " min";
  }

  function queueOf(row) {
    return row.tenant + " · " + row.profile + " · " + row.queue;
  }

  function served(a, b) {
    return (
      a.priority_number - b.priority_number ||
      Date.parse(a.created_at) - Date.parse(b.created_at) ||
      (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
    );
  }

  function shownTeam(row) {
    return !teamSelect.value || row.queue === teamSelect.value;
  }

  function rowButton(row, label, className) {
    const button = el("button", "button " + className, label);
    button.type = "button";
    button.dataset.escalation = row.id;
    return button;
  }

  function drawQueues() {
    const queues = new Map();
    [...waiting.values()].sort(served).forEach((row) => {
      if (!queues.has(queueOf(row))) queues.set(queueOf(row), []);
      queues.get(queueOf(row)).push(row);
    });
    const boxes = [];
    let shown = 0;
    [...queues.keys()].sort().forEach((name) => {
      const rows = queues.get(name);
      rows.forEach((row, index) => (row.position = index + 1)); // the place counts every row of the queue
      const visible = rows.filter(shownTeam);
      if (!visible.length) return;
      shown += visible.length;
      const table = el("table", "desk-queue");
      table.dataset.queue = name;
      table.append(el("caption", "", name + " (" + rows.length + ")"));
      const head = el("tr");
      ["#", "Waiting", "Priority", "Reason", "Customer", ""].forEach((text) => head.append(el("th", "", text)));
      const thead = el("thead");
      thead.append(head);
      table.append(thead);
      const body = el("tbody");
      visible.forEach((row) => {
        const line = el("tr", "desk-row");
        line.dataset.escalation = row.id;
        line.dataset.priority = row.priority;
        if (opened && opened.escalation.id === row.id) line.dataset.open = "true";
        const session = row.conversation_key.split(":").slice(2).join(":");
        line.append(
          el("td", "desk-position", String(row.position)),
          el("td", "desk-waited", waited(row.created_at)),
          el("td", "desk-priority", row.priority),
          el("td", "desk-reason", reasons[row.reason] || row.reason),
          el("td", "desk-customer", session)
        );
        line.querySelector(".desk-waited").dataset.since = row.created_at;
        const actions = el("td", "desk-row-actions");
        actions.append(rowButton(row, "Open", "desk-open"), rowButton(row, "Take", "desk-row-take"));
        line.append(actions);
        body.append(line);
      });
      table.append(body);
      boxes.push(table);
    });
    queuesBox.replaceChildren(...boxes);
    queuesEmpty.hidden = shown > 0;
    queueCount.textContent = shown ? "(" + shown + ")" : "";
  }

  function drawMine() {
    const items = [...mine.values()].map((row) => {
      const item = el("li", "desk-row desk-mine-row");
      item.dataset.escalation = row.id;
      if (row.unread) item.dataset.unread = "true";
      if (opened && opened.escalation.id === row.id) item.dataset.open = "true";
      const link = rowButton(row, queueOf(row), "desk-open desk-mine-open");
      item.append(link, el("span", "desk-customer", " " + row.conversation_key.split(":").slice(2).join(":")));
      if (row.unread) item.append(el("span", "desk-unread", " new message"));
      return item;
    });
    mineList.replaceChildren(...items);
    mineEmpty.hidden = items.length > 0;
    mineCount.textContent = items.length ? "(" + items.length + ")" : "";
  }

  function drawLists() {
    drawQueues();
    drawMine();
  }

  function place(row) {
    waiting.delete(row.id);
    mine.delete(row.id);
    if (row.status === "queued") waiting.set(row.id, row);
    else if (row.status === "assigned" && row.assigned_to === userId) mine.set(row.id, row);
  }

  function load(state) {
    reasons = state.reasons || reasons;
    priorities = state.priorities || priorities;
    waiting.clear();
    mine.clear();
    (state.queues || []).forEach(place);
    (state.mine || []).forEach(place);
    drawLists();
  }

  // -- the opened conversation ---------------------------------------------------------------------------

  function author(message) {
    const who = message.author || {};
    if (message.role === "user") return "Customer";
    if (message.role === "note") return "Internal note · " + (who.name || "a person");
    if (message.role === "human") return (who.name || "A person") + " (person)";
    if (message.agent === "human") return "Assistants, handing over"; // the notice that put the customer in line
    return message.agent || "assistant";
  }

  function decisionLine(decision) {
    const how = [decision.method, decision.intent && "intent " + decision.intent].filter(Boolean).join(", ");
    const confidence = Number(decision.confidence).toFixed(2);
    const text =
      decision.method === "human"
        ? "Held by a person: the message went to the desk"
        : "Routed to " + (decision.agent || "—") + (how ? " (" + how + ", " + confidence + ")" : "");
    const line = el("p", "desk-decision", text);
    line.dataset.method = decision.method || "";
    if (decision.reason) line.title = decision.reason;
    return line;
  }

  function messageBlock(message) {
    const block = el("div", "desk-message");
    block.dataset.role = message.role;
    block.dataset.messageId = String(message.id);
    const head = el("div", "desk-message-author", author(message));
    if (message.created_at) {
      head.append(el("time", "desk-message-time", " " + new Date(message.created_at).toLocaleTimeString()));
    }
    block.append(head, el("div", "desk-message-text", message.content));
    return block;
  }

  function addMessage(message) {
    if (historyBox.querySelector('.desk-message[data-message-id="' + message.id + '"]')) return;
    historyBox.append(messageBlock(message));
    (opened.decisionsByMessage[message.id] || []).forEach((decision) => historyBox.append(decisionLine(decision)));
    historyBox.scrollTop = historyBox.scrollHeight;
  }

  function statusText(row) {
    if (row.status === "queued") {
      const place = (waiting.get(row.id) || row).position;
      return "Waiting in " + row.queue + "'s queue" + (place ? ", number " + place : "") + " (" + row.priority + ")";
    }
    if (row.status === "assigned") {
      const who = row.assigned_to === userId ? "With you" : "With " + (row.person || "someone else");
      return who + " (" + row.priority + ")";
    }
    if (row.status === "returned") return "Handed back to the assistants";
    return "Closed: the conversation ended";
  }

  function drawControls() {
    const row = opened.escalation;
    const open = row.status === "queued" || row.status === "assigned";
    const mineNow = row.status === "assigned" && row.assigned_to === userId;
    const othersNow = row.status === "assigned" && !mineNow;
    view.dataset.status = row.status;
    view.dataset.mine = String(mineNow);
    statusLine.textContent = statusText(row);
    takeButton.hidden = row.status !== "queued";
    [replyInput, document.getElementById("desk-reply-send")].forEach((c) => (c.disabled = !open || othersNow));
    [noteInput, document.getElementById("desk-note-send")].forEach((c) => (c.disabled = !open));
    [transferTeam, transferPriority, transferNote, document.getElementById("desk-transfer")].forEach(
      (c) => (c.disabled = !open || othersNow)
    );
    [handBackNote, document.getElementById("desk-hand-back")].forEach((c) => (c.disabled = !open || othersNow));
  }

  function show(detail) {
    const decisionsByMessage = {};
    (detail.decisions || []).forEach((decision) => {
      if (decision.message_id === null || decision.message_id === undefined) return;
      (decisionsByMessage[decision.message_id] = decisionsByMessage[decision.message_id] || []).push(decision);
    });
    opened = { ...detail, decisionsByMessage: decisionsByMessage };
    const row = detail.escalation;
    view.hidden = false;
    pick.hidden = true;
    view.dataset.escalation = row.id;
    title.textContent = queueOf(row) + " — customer " + detail.conversation.key.split(":").slice(2).join(":");
    title.title = detail.conversation.key;
    const label = reasons[row.reason] || row.reason;
    const said = (detail.reason_text || "").replace(/\.$/, "");
    why.textContent = label + (said && said !== label ? ": " + detail.reason_text : "");
    summary.textContent = detail.summary || "No summary.";
    historyBox.replaceChildren();
    (detail.history || []).forEach(addMessage);
    transferTeam.replaceChildren(
      ...(detail.teams || []).map((team) => {
        const option = el("option", "", team + (team === row.queue ? " (now)" : ""));
        option.value = team;
        return option;
      })
    );
    const other = (detail.teams || []).find((team) => team !== row.queue);
    if (other) transferTeam.value = other;
    transferPriority.replaceChildren(
      ...priorities.map((choice) => {
        const option = el("option", "", choice.label);
        option.value = String(choice.value);
        option.selected = choice.value === row.priority_number;
        return option;
      })
    );
    const held = mine.get(row.id);
    if (held) held.unread = false;
    showError("");
    drawControls();
    drawLists();
    const url = new URL(location.href);
    url.searchParams.set("escalation", row.id);
    window.history.replaceState(null, "", url);
  }

  function changed(row) {
    if (opened && opened.escalation.id === row.id) {
      opened.escalation = { ...opened.escalation, ...row };
      drawControls();
    }
  }

  // -- the socket ----------------------------------------------------------------------------------------

  function send(action, fields) {
    const id = "f" + nextFrame++;
    return new Promise((resolve, reject) => {
      if (!socket || socket.readyState !== WebSocket.OPEN) {
        reject(new Error("The desk is not connected: wait a moment and try again."));
        return;
      }
      pending.set(id, { resolve: resolve, reject: reject });
      socket.send(JSON.stringify({ id: id, action: action, ...fields }));
    });
  }

  const events = {
    snapshot(event) {
      load(event);
      if (opened) open(opened.escalation.id);
    },
    queued(event) {
      if (event.escalation) place(event.escalation);
      drawLists();
    },
    taken(event) {
      place(event.escalation);
      changed(event.escalation);
      drawLists();
    },
    transferred(event) {
      place(event.escalation);
      changed(event.escalation);
      drawLists();
    },
    returned(event) {
      place(event.escalation);
      changed(event.escalation);
      drawLists();
    },
    closed(event) {
      place(event.escalation);
      changed(event.escalation);
      drawLists();
    },
    message(event) {
      if (opened && opened.escalation.id === event.escalation) {
        addMessage(event.message);
      } else if (mine.has(event.escalation) && event.message.role === "user") {
        mine.get(event.escalation).unread = true;
        drawMine();
      }
    },
    note(event) {
      if (opened && opened.escalation.id === event.escalation) addMessage(event.message);
    },
  };

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(scheme + "//" + location.host + "/ws/desk/");
    socket = ws;
    setConnection("connecting", "Connecting…");
    ws.onopen = () => {
      retry = 1000;
      setConnection("open", "Live");
    };
    ws.onmessage = (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch (error) {
        showError("The server sent a frame that is not JSON.");
        return;
      }
      if (event.id !== undefined && pending.has(event.id)) {
        const waiter = pending.get(event.id);
        pending.delete(event.id);
        if (event.type === "error") waiter.reject(new Error(errorText(event)));
        else waiter.resolve(event);
        return;
      }
      if (event.type === "error") {
        setConnection("refused", errorText(event));
        return;
      }
      if (events[event.type]) events[event.type](event);
    };
    ws.onclose = (close) => {
      if (socket !== ws) return;
      socket = null;
      pending.forEach((waiter) => waiter.reject(new Error("The desk was disconnected before the answer came.")));
      pending.clear();
      if (close.code === 4401 || close.code === 4403) {
        const said = connection.dataset.state === "refused" ? connection.textContent : "";
        setConnection("refused", said || "Refused (" + close.code + ")");
        return;
      }
      setConnection("closed", "Disconnected: trying again…");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }

  // -- actions -------------------------------------------------------------------------------------------

  async function act(action, fields, busy) {
    if (busy) busy.disabled = true;
    showError("");
    try {
      return await send(action, { escalation: opened ? opened.escalation.id : fields.escalation, ...fields });
    } catch (error) {
      showError(error.message);
      return null;
    } finally {
      if (busy) busy.disabled = false;
      if (opened) drawControls();
    }
  }

  async function open(id) {
    const answer = await act("open", { escalation: id });
    if (answer) show(answer);
  }

  async function take(id, button) {
    const answer = await send("take", { escalation: id }).catch((error) => {
      showError(error.message);
      return null;
    });
    if (button) button.disabled = false;
    if (!answer) return;
    place(answer.escalation);
    await open(id);
  }

  document.addEventListener("click", (click) => {
    const button = click.target.closest("button[data-escalation]");
    if (!button) return;
    if (button.classList.contains("desk-row-take")) {
      button.disabled = true;
      take(button.dataset.escalation, button);
    } else if (button.classList.contains("desk-open")) {
      open(button.dataset.escalation);
    }
  });

  takeButton.addEventListener("click", () => {
    if (opened) take(opened.escalation.id, takeButton);
  });

  replyForm.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    const text = replyInput.value.trim();
    if (!text || !opened) return;
    const answer = await act("reply", { text: text }, document.getElementById("desk-reply-send"));
    if (!answer) return;
    replyInput.value = "";
    addMessage(answer.message);
  });

  replyInput.addEventListener("keydown", (key) => {
    if (key.key === "Enter" && !key.shiftKey) {
      key.preventDefault();
      replyForm.requestSubmit();
    }
  });

  noteForm.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    const text = noteInput.value.trim();
    if (!text || !opened) return;
    const answer = await act("note", { text: text }, document.getElementById("desk-note-send"));
    if (!answer) return;
    noteInput.value = "";
    addMessage(answer.message);
  });

  transferForm.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    if (!opened) return;
    const fields = { team: transferTeam.value, priority: Number(transferPriority.value), note: transferNote.value };
    const answer = await act("transfer", fields, document.getElementById("desk-transfer"));
    if (!answer) return;
    transferNote.value = "";
    place(answer.escalation);
    await open(answer.escalation.id);
  });

  handBackForm.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    if (!opened) return;
    const answer = await act("hand_back", { note: handBackNote.value }, document.getElementById("desk-hand-back"));
    if (!answer) return;
    handBackNote.value = "";
    place(answer.escalation);
    await open(answer.escalation.id);
  });

  teamSelect.addEventListener("change", () => {
    const url = new URL(location.href);
    if (teamSelect.value) url.searchParams.set("team", teamSelect.value);
    else url.searchParams.delete("team");
    window.history.replaceState(null, "", url);
    drawQueues();
  });

  // The waiting times move on by themselves.
  setInterval(() => {
    document.querySelectorAll(".desk-waited[data-since]").forEach((cell) => {
      cell.textContent = waited(cell.dataset.since);
    });
  }, 15000);

  load(initial);
  if (initial.opened) show(initial.opened);
  connect();
})();
