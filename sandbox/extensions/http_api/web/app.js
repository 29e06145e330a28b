// Hearth's web page: log in with the token, chat (streamed), watch the kernel.
// Plain DOM, no framework, no build step; text is always set with textContent.
"use strict";

const $ = (selector) => document.querySelector(selector);
const session = { csrf: null, conversation: "web", notes: null, timer: null };

// ------------------------------------------------------------------ requests

async function post(path, body) {
  return fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": session.csrf || "" },
    body: JSON.stringify(body),
  });
}

async function errorText(response) {
  try {
    const body = await response.json();
    return body.error ? body.error.message : `HTTP ${response.status}`;
  } catch (_) {
    return `HTTP ${response.status}`;
  }
}

function chatBody(text, stream, extensions, files) {
  // files go as content parts (data: URLs) beside the text (ADR 0096, attachments.js)
  const content = files && files.length ? [{ type: "text", text }, ...files] : text;
  const body = { model: "hearth", stream, user: session.conversation, messages: [{ role: "user", content }] };
  if (extensions && extensions.length) body.extensions = extensions;
  return body;
}

// A command's answer (not streamed): /reminders, /cancel N, /memories.
async function command(text) {
  const response = await post("/v1/chat/completions", chatBody(text, false));
  if (!response.ok) throw new Error(await errorText(response));
  const body = await response.json();
  return body.choices[0].message.content;
}

// ------------------------------------------------------------------ log in / out

async function start() {
  const response = await fetch("/web/session", { credentials: "same-origin" });
  if (response.status === 401) return showLogin();
  const body = await response.json();
  session.csrf = body.csrf;
  session.conversation = body.conversation;
  $("#login").hidden = true;
  $("#app").hidden = false;
  $("#logout").hidden = false;
  listenForNotifications();
  // a message sent before the history is shown would be wiped by it: Send waits for it
  $("#send").disabled = true;
  try {
    await loadHistory();
  } finally {
    $("#send").disabled = false;
  }
  await Promise.all([refreshStatus(), refreshReminders(), refreshMemories(), Posts.refresh()]);
  session.timer = setInterval(refreshStatus, 5000);
}

function showLogin() {
  $("#app").hidden = true;
  $("#logout").hidden = true;
  $("#login").hidden = false;
  $("#token").focus();
}

$("#login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const response = await post("/web/login", { token: $("#token").value });
  if (!response.ok) {
    $("#login-error").textContent = await errorText(response);
    return;
  }
  $("#token").value = "";
  $("#login-error").textContent = "";
  await start();
});

$("#logout").addEventListener("click", async () => {
  await post("/web/logout", {});
  if (session.notes) session.notes.close();
  clearInterval(session.timer);
  showLogin();
});

// ------------------------------------------------------------------ chat

const EMPTY_ANSWER = "(The model answered nothing.)";

function addMessage(kind, text) {
  const item = document.createElement("li");
  item.className = kind;
  item.textContent = text;
  $("#messages").append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

// The conversation as the server showed it (a reload keeps the chat).
async function loadHistory() {
  const response = await fetch("/web/history", { credentials: "same-origin" });
  if (!response.ok) return;
  const { messages } = await response.json();
  $("#messages").replaceChildren();
  let asked = null; // the post-processors of the message the next answer answers
  for (const m of messages) {
    const bubble = addMessage(m.role === "user" ? "you" : "hearth", m.text);
    if (m.role !== "user") markEmpty(bubble);
    if (m.postprocess) Posts.addTags(bubble, m.postprocess.turn_id, m.postprocess.tags);
    if (m.role !== "user" && asked) Posts.restoreBlocks(bubble, asked.turn_id, asked.tags);
    asked = m.role === "user" ? m.postprocess || null : null;
  }
}

function markEmpty(bubble) {
  if (!bubble.textContent.trim() && !bubble.classList.contains("error")) {
    bubble.textContent = EMPTY_ANSWER;
    bubble.classList.add("empty");
  }
}

// The files a reply came with (ADR 0096): a picture inline, anything else a link;
// both served by GET /v1/files/{id} to this session's person only.
function addFiles(bubble, files) {
  for (const file of files) {
    const figure = document.createElement("figure");
    figure.className = "file";
    if (file.mime_type.startsWith("image/")) {
      const image = document.createElement("img");
      image.src = file.url;
      image.alt = file.caption || file.name;
      figure.append(image);
    } else {
      const link = document.createElement("a");
      link.href = file.url;
      link.download = file.name;
      link.textContent = `${file.name} (${Math.max(1, Math.round(file.size / 1000))} KB)`;
      figure.append(link);
    }
    if (file.caption) {
      const caption = document.createElement("figcaption");
      caption.textContent = file.caption;
      figure.append(caption);
    }
    bubble.append(figure);
  }
}

// A question the turn waits for (an approval): a button per answer, sent as a message.
const ANSWERS = { once: (id) => `/approve ${id}`, always: (id) => `/approve ${id} always`, deny: (id) => `/deny ${id}` };

function addChoices(bubble, questions) {
  for (const q of questions) {
    const row = document.createElement("div");
    row.className = "choices";
    for (const option of q.options) {
      const answer = ANSWERS[option.value];
      if (!answer) continue;
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = option.label;
      button.dataset.answer = option.value;
      button.addEventListener("click", () => {
        row.querySelectorAll("button").forEach((b) => { b.disabled = true; });
        send(answer(q.id));
      });
      row.append(button);
    }
    bubble.append(row);
  }
}

// Reads an SSE response of chat.completion.chunk objects into `bubble`.
async function streamInto(response, bubble) {
  try {
    return await readChunks(response, bubble);
  } finally {
    markEmpty(bubble);
  }
}

// The text into `bubble`; returns the reply's `hearth` field (questions the turn
// waits for, post-processor results), if any.
async function readChunks(response, bubble) {
  let extra = null;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return extra;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith("data: ")) continue;
      const data = event.slice(6);
      if (data === "[DONE]") return extra;
      const chunk = JSON.parse(data);
      if (chunk.error) {
        bubble.className = "hearth error";
        bubble.textContent += chunk.error.message;
        return null;
      }
      if (!chunk.choices.length) continue;  // a usage chunk
      bubble.textContent += chunk.choices[0].delta.content || "";
      if (chunk.hearth) extra = chunk.hearth;
    }
  }
}

$("#chat-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("#prompt").value.trim();
  if (!text && !Attachments.count) return;
  $("#prompt").value = "";
  const files = await Attachments.take();
  await send(text, Posts.takeChips(), files);
});

// `extensions`: the post-processors the input's chips ask for.
async function send(text, extensions, files) {
  const mine = addMessage("you", text);
  if (files) Attachments.show(mine, files);
  const bubble = addMessage("hearth", "");
  $("#send").disabled = true;
  try {
    const response = await post("/v1/chat/completions", chatBody(text, true, extensions, files));
    if (!response.ok) {
      bubble.className = "hearth error";
      bubble.textContent = await errorText(response);
      return;
    }
    const extra = await streamInto(response, bubble);
    if (extra && extra.questions) addChoices(bubble, extra.questions);
    if (extra && extra.files) addFiles(bubble, extra.files);
    if (extra && extra.postprocess && extra.turn_id) {
      Posts.addTags(mine, extra.turn_id, Posts.tagsOf(extra.postprocess));
      Posts.addBlocks(bubble, extra.turn_id, extra.postprocess);
    }
  } finally {
    $("#send").disabled = false;
  }
  if (/^\/(remind|cancel)\b/.test(text)) await refreshReminders();
}

$("#prompt").addEventListener("keydown", (event) => {
  if (Posts.onKey(event)) {
    event.preventDefault();
    return;
  }
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("#chat-form").requestSubmit();
  }
});

// ------------------------------------------------------------------ notifications

function listenForNotifications() {
  if (session.notes) session.notes.close();
  const url = `/v1/notifications?stream=true&user=${encodeURIComponent(session.conversation)}`;
  session.notes = new EventSource(url);
  session.notes.onmessage = (event) => {
    const note = JSON.parse(event.data);
    const item = document.createElement("li");
    item.textContent = `${new Date(note.created * 1000).toLocaleTimeString()} — ${note.text}`;
    $("#notifications").prepend(item);
  };
}

// ------------------------------------------------------------------ status

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text == null ? "" : String(text);
  if (className) td.className = className;
  return td;
}

function fill(tableSelector, rows, render) {
  const body = $(`${tableSelector} tbody`);
  body.replaceChildren();
  for (const item of rows) render(body.insertRow(), item);
  if (!rows.length) cell(body.insertRow(), "none").colSpan = 5;
}

function duration(seconds) {
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  return d ? `${d}d ${h}h ${m}m` : h ? `${h}h ${m}m` : `${m}m ${s % 60}s`;
}

function when(seconds) {
  return new Date(seconds * 1000).toLocaleString();
}

async function refreshStatus() {
  const response = await fetch("/web/status", { credentials: "same-origin" });
  if (response.status === 401) return showLogin();
  if (!response.ok) {
    $("#toast").textContent = await errorText(response);
    return;
  }
  const { kernel, api } = await response.json();
  $("#model").textContent = kernel.model;
  $("#uptime").textContent = duration(kernel.uptime_s);
  $("#counts").textContent = Object.entries(kernel.event_counts).map(([k, v]) => `${k} ${v}`).join(", ");
  const active = kernel.extensions.filter((e) => e.wired).length;
  $("#summary").textContent = `${active} extensions active · ${api.in_flight} requests waiting · ${api.listen}`;
  fill("#extensions", kernel.extensions, (row, e) => {
    cell(row, e.id);
    cell(row, e.wired ? "active" : e.status, `status-${e.status}`);
    cell(row, e.error, "error");
  });
  fill("#mcp", kernel.mcp_servers, (row, s) => {
    cell(row, s.name);
    cell(row, s.state);
    cell(row, s.detail);
  });
  fill("#dead", kernel.dead_letters, (row, d) => {
    cell(row, d.event_id);
    cell(row, d.topic);
    cell(row, d.subscriber);
    cell(row, d.error, "error");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "Requeue";
    button.dataset.event = d.event_id;
    button.addEventListener("click", () => requeue(d.event_id));
    row.insertCell().append(button);
  });
  const shown = $("#all-events").checked ? kernel.recent_events : kernel.recent_events.filter(conversational);
  fill("#events", shown, (row, e) => {
    cell(row, e.id);
    cell(row, when(e.created_at));
    cell(row, e.topic);
    cell(row, e.source);
    cell(row, e.deliveries.map((d) => `${d.subscriber}: ${d.status}`).join(", "));
  });
}

// By default the events of conversations (messages, replies, turns, answers), not
// the replay recorder's or the kernel's housekeeping; the checkbox shows all.
function conversational(event) {
  const topic = event.topic;
  if (topic.startsWith("replay.")) return false;
  if (topic.startsWith("system.")) return /^system\.(reply|ui|turn)/.test(topic);
  return true;
}

$("#all-events").addEventListener("change", refreshStatus);

async function requeue(eventId) {
  const response = await post("/web/requeue", { event_id: eventId });
  $("#toast").textContent = response.ok
    ? `Requeued event ${eventId}.`
    : await errorText(response);
  await refreshStatus();
}

async function refreshReminders() {
  const list = $("#reminders");
  let text;
  try {
    text = await command("/reminders");
  } catch (error) {
    list.replaceChildren(Object.assign(document.createElement("li"), { textContent: error.message }));
    return;
  }
  list.replaceChildren();
  for (const line of text.split("\n")) {
    const item = document.createElement("li");
    const match = /^#(\d+)\s+(.*)$/.exec(line);
    item.textContent = match ? `#${match[1]} ${match[2]}` : line;
    if (match) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Cancel";
      button.dataset.reminder = match[1];
      button.addEventListener("click", async () => {
        $("#toast").textContent = await command(`/cancel ${match[1]}`);
        await refreshReminders();
      });
      item.append(button);
    }
    list.append(item);
  }
}

async function refreshMemories() {
  try {
    $("#memories").textContent = (await command("/memories")).split("\n")[0];
  } catch (error) {
    $("#memories").textContent = error.message;
  }
}

$("#refresh").addEventListener("click", () =>
  Promise.all([refreshStatus(), refreshReminders(), refreshMemories()]),
);

Posts.bind(command, (text) => { $("#toast").textContent = text; });
Attachments.setup();
start();
