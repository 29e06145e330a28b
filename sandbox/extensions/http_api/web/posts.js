// Post-processors on the web page (issue 46): `#` opens an autocomplete of your
// activations, a chosen one becomes a chip in the input (× removes it, Backspace on
// an empty input removes the last), sent with the message as `extensions`; a sent
// message carries a tag per result that opens it in a popover (also after a reload),
// or, for a `chat_append` one, scrolls to its block under the answer and flashes it;
// the configuration panel lists your activations and every processor's metadata,
// and changes them with the commands (`/ext set|rename|deactivate|activate|show`,
// `/reload` — which the kernel allows the owner only). Loaded before app.js, which calls
// `Posts.*`; text is always set with textContent.
"use strict";

const Posts = (() => {
  const $ = (selector) => document.querySelector(selector);
  const state = { activated: [], available: [], chips: [], menu: [], chosen: 0 };
  let runCommand = async () => "";
  let toast = () => {};

  function label(name, param) {
    return param ? `#${name}:${param}` : `#${name}`;
  }

  async function refresh() {
    const response = await fetch("/web/postprocessors", { credentials: "same-origin" });
    if (!response.ok) return;
    const body = await response.json();
    state.activated = body.activated;
    state.available = body.available;
    renderConfig();
  }

  // ---------------------------------------------------------------- autocomplete

  // The `#word` being typed just before the caret, and where its `#` is.
  function hashWord() {
    const box = $("#prompt");
    const before = box.value.slice(0, box.selectionStart);
    const match = /(?:^|\s)#([\w-]*)$/.exec(before);
    return match ? { prefix: match[1].toLowerCase(), start: before.length - match[1].length - 1 } : null;
  }

  function updateMenu() {
    const word = hashWord();
    const taken = new Set(state.chips.map((c) => c.name));
    state.menu = word
      ? state.activated.filter((a) => a.available && a.name.startsWith(word.prefix) && !taken.has(a.name))
      : [];
    state.chosen = 0;
    renderMenu();
  }

  function renderMenu() {
    const menu = $("#post-menu");
    menu.replaceChildren();
    menu.hidden = !state.menu.length;
    $("#prompt").setAttribute("aria-expanded", String(!menu.hidden));
    state.menu.forEach((activation, index) => {
      const item = document.createElement("li");
      item.setAttribute("role", "option");
      item.setAttribute("aria-selected", String(index === state.chosen));
      item.dataset.name = activation.name;
      const name = document.createElement("strong");
      name.textContent = label(activation.name, activation.default_param);
      const about = document.createElement("span");
      about.textContent = activation.description || activation.processor;
      item.append(name, about);
      item.addEventListener("mousedown", (event) => {
        event.preventDefault(); // keep the focus in the input
        pick(index);
      });
      menu.append(item);
    });
  }

  function closeMenu() {
    state.menu = [];
    renderMenu();
  }

  // The chosen activation becomes a chip; its `#word` leaves the text.
  function pick(index) {
    const choice = state.menu[index];
    const word = hashWord();
    if (!choice || !word) return;
    const box = $("#prompt");
    const caret = box.selectionStart;
    box.value = box.value.slice(0, word.start) + box.value.slice(caret);
    box.selectionStart = box.selectionEnd = word.start;
    state.chips.push({ name: choice.name, param: null });
    renderChips();
    closeMenu();
    box.focus();
  }

  function renderChips() {
    const row = $("#chips");
    row.replaceChildren();
    state.chips.forEach((chip, index) => {
      const item = document.createElement("span");
      item.className = "chip";
      item.dataset.name = chip.name;
      item.textContent = label(chip.name, chip.param);
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "×";
      remove.setAttribute("aria-label", `Remove #${chip.name}`);
      remove.addEventListener("click", () => {
        state.chips.splice(index, 1);
        renderChips();
        $("#prompt").focus();
      });
      item.append(remove);
      row.append(item);
    });
  }

  // Keys the autocomplete and the chips take; `true` when the key was used.
  function onKey(event) {
    if (state.menu.length) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        const step = event.key === "ArrowDown" ? 1 : -1;
        state.chosen = (state.chosen + step + state.menu.length) % state.menu.length;
        renderMenu();
        return true;
      }
      if (event.key === "Enter" || event.key === "Tab") {
        pick(state.chosen);
        return true;
      }
      if (event.key === "Escape") {
        closeMenu();
        return true;
      }
    }
    if (event.key === "Backspace" && $("#prompt").value === "" && state.chips.length) {
      state.chips.pop();
      renderChips();
      return true;
    }
    return false;
  }

  // The chips as the request's `extensions`, cleared for the next message.
  function takeChips() {
    const taken = state.chips.map((c) => ({ name: c.name, param: c.param }));
    state.chips = [];
    renderChips();
    return taken;
  }

  // ---------------------------------------------------------------- tags and popovers

  function tagsOf(results) {
    return Object.entries(results).map(([name, r]) => ({
      name,
      param: (r.metadata || {}).param || null,
      output_target: r.output_target,
      success: r.success,
    }));
  }

  // `chat_append` results as blocks under the answer (`results` by name, as the
  // reply's `hearth.postprocess` or `GET /v1/postprocess/{turn_id}` give them).
  function addBlocks(bubble, turnId, results) {
    for (const [name, result] of Object.entries(results)) {
      if (result.output_target !== "chat_append" || !result.success) continue;
      const block = document.createElement("div");
      block.className = "post-block";
      block.dataset.turn = turnId;
      block.dataset.name = name;
      const head = document.createElement("div");
      head.className = "post-head";
      head.textContent = `#${name}`;
      const body = document.createElement("pre");
      const content = result.content;
      body.textContent = typeof content === "string" ? content : JSON.stringify(content, null, 2);
      block.append(head, body);
      bubble.append(block);
    }
  }

  // After a reload: the blocks of a message's `chat_append` results, fetched again.
  async function restoreBlocks(bubble, turnId, tags) {
    if (!tags.some((t) => t.output_target === "chat_append" && t.success)) return;
    const response = await fetch(`/v1/postprocess/${encodeURIComponent(turnId)}`, {
      credentials: "same-origin",
    });
    if (response.ok) addBlocks(bubble, turnId, (await response.json()).results);
  }

  // A `chat_append` tag scrolls to its block and flashes it; the others open a popover.
  function findBlock(turnId, name) {
    for (const block of document.querySelectorAll(".post-block")) {
      if (block.dataset.turn === turnId && block.dataset.name === name) return block;
    }
    return null;
  }

  function addTags(bubble, turnId, tags) {
    const row = document.createElement("div");
    row.className = "post-tags";
    for (const tag of tags) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = tag.success ? "post-tag" : "post-tag failed";
      button.dataset.name = tag.name;
      button.setAttribute("aria-expanded", "false");
      button.textContent = label(tag.name, tag.param);
      button.addEventListener("click", () => {
        const block = tag.output_target === "chat_append" ? findBlock(turnId, tag.name) : null;
        if (!block) return toggle(row, button, turnId, tag.name);
        block.scrollIntoView({ block: "nearest" });
        block.classList.remove("flash");
        void block.offsetWidth; // restart the animation
        block.classList.add("flash");
      });
      row.append(button);
    }
    bubble.append(row);
  }

  async function toggle(row, button, turnId, name) {
    const open = row.querySelector(".post-popover");
    const same = open && open.dataset.name === name;
    if (open) open.remove();
    row.querySelectorAll(".post-tag").forEach((t) => t.setAttribute("aria-expanded", "false"));
    if (same) return;
    const popover = document.createElement("div");
    popover.className = "post-popover";
    popover.dataset.name = name;
    popover.setAttribute("role", "dialog");
    popover.setAttribute("aria-label", `#${name} result`);
    popover.textContent = "Loading…";
    button.setAttribute("aria-expanded", "true");
    row.append(popover);
    const response = await fetch(`/v1/postprocess/${encodeURIComponent(turnId)}`, {
      credentials: "same-origin",
    });
    if (!response.ok) {
      popover.textContent = `Not available (HTTP ${response.status})`;
      return;
    }
    const result = (await response.json()).results[name];
    const head = document.createElement("div");
    head.className = "post-head";
    head.textContent = `#${name} · ${result.output_target} · ${result.success ? "ok" : "failed"}`;
    const body = document.createElement("pre");
    const content = result.content;
    body.textContent = !result.success
      ? result.error
      : typeof content === "string" ? content : JSON.stringify(content, null, 2);
    popover.replaceChildren(head, body);
  }

  // ---------------------------------------------------------------- configuration panel

  // The panel is redrawn before the answer shows: what the toast confirms is on screen.
  async function act(text) {
    const answer = await runCommand(text);
    await refresh();
    toast(answer);
  }

  function renderConfig() {
    const body = $("#post-activations tbody");
    body.replaceChildren();
    for (const a of state.activated) {
      const row = body.insertRow();
      row.dataset.name = a.name;
      row.insertCell().textContent = `#${a.name}`;
      row.insertCell().textContent = a.available ? a.processor : `${a.processor} (not available now)`;
      const paramCell = row.insertCell();
      const input = document.createElement("input");
      input.value = a.default_param || "";
      input.placeholder = "none";
      input.setAttribute("aria-label", `Default param of #${a.name}`);
      input.size = 9;
      const save = button("Save", "set", () => act(`/ext set ${a.name} ${input.value.trim()}`.trim()));
      paramCell.append(input, save);
      const newName = document.createElement("input");
      newName.placeholder = "new name";
      newName.setAttribute("aria-label", `New name for #${a.name}`);
      newName.size = 9;
      const rename = button("Rename", "rename", () => {
        const wanted = newName.value.trim();
        if (wanted) act(`/ext rename ${a.name} ${wanted}`);
      });
      const source = button("Source", "source", () => showSource(a.name));
      const off = button("Deactivate", "deactivate", () => act(`/ext deactivate ${a.name}`));
      row.insertCell().append(newName, rename, source, off);
    }
    const list = $("#post-available");
    list.replaceChildren();
    for (const p of state.available) {
      const item = document.createElement("li");
      item.dataset.name = p.name;
      const title = document.createElement("strong");
      title.textContent = `${p.display_name} #${p.name}`;
      const marks = document.createElement("span");
      marks.className = "marks";
      marks.textContent = ` ${p.category} · ${p.builtin ? "built-in" : `from ${p.owner}`} · ${p.output_target}`;
      const about = document.createElement("p");
      about.textContent = p.description;
      const params = document.createElement("p");
      params.className = "params";
      const allowed = p.parameters.allowed_values;
      params.textContent = !p.parameters.supported
        ? "No param"
        : `Param: ${allowed ? allowed.join(", ") : "any"}`;
      const add = button("Activate", "activate", () => act(`/ext activate ${p.name}`));
      // reloading an extension from its files is the owner's (the kernel refuses others)
      const reload = button("Reload", "reload", () => act(`/reload ${p.owner}`));
      item.append(title, marks, about, params, add, reload);
      list.append(item);
    }
  }

  function button(text, action, onClick) {
    const made = document.createElement("button");
    made.type = "button";
    made.textContent = text;
    made.dataset.action = action;
    made.addEventListener("click", onClick);
    return made;
  }

  async function showSource(name) {
    const shown = $("#post-source");
    shown.textContent = await runCommand(`/ext show ${name}`);
    shown.hidden = false;
    shown.scrollIntoView({ block: "nearest" });
  }

  function bind(command, say) {
    runCommand = command;
    toast = say;
    $("#prompt").addEventListener("input", updateMenu);
    $("#prompt").addEventListener("blur", closeMenu); // a click on an item keeps the focus
  }

  return { bind, refresh, onKey, takeChips, tagsOf, addTags, addBlocks, restoreBlocks };
})();
