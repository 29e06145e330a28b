// Files sent with the next message (issue 45, ADR 0096): chosen with the paperclip
// (pictures, documents, voice notes; several at once) or pasted into the input (a
// screenshot, a copied file). Each is listed under the input with a × to drop it;
// on send they go as content parts of the chat request — a picture as an
// `image_url` part, anything else as a `file` part — each a data: URL, and the
// kernel keeps them for you and offers them to the model. Loaded before app.js,
// which calls `Attachments.*`; text is always set with textContent.
"use strict";

const Attachments = (() => {
  const $ = (selector) => document.querySelector(selector);
  let chosen = [];  // File objects, in the order they were added

  function render() {
    const list = $("#attached");
    list.replaceChildren();
    chosen.forEach((file, index) => {
      const item = document.createElement("li");
      item.textContent = file.name;
      const drop = document.createElement("button");
      drop.type = "button";
      drop.className = "drop";
      drop.textContent = "×";
      drop.title = `Do not send ${file.name}`;
      drop.addEventListener("click", () => {
        chosen.splice(index, 1);
        render();
      });
      item.append(drop);
      list.append(item);
    });
    list.hidden = chosen.length === 0;
    $("#attach-label").classList.toggle("chosen", chosen.length > 0);
  }

  function add(files) {
    for (const file of files) chosen.push(nameOf(file, chosen.length + 1));
    render();
  }

  // A pasted picture comes as "image.png" (or with no name): numbered, so two
  // pasted screenshots are two files.
  function nameOf(file, number) {
    if (file.name && file.name !== "image.png") return file;
    const kind = (file.type.split("/")[1] || "bin").replace(/[^a-z0-9]/gi, "");
    return new File([file], `pasted-${number}.${kind}`, { type: file.type });
  }

  function dataUrl(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
  }

  // The chosen files as content parts (and forgotten: they go with this message).
  async function take() {
    const files = chosen;
    chosen = [];
    render();
    const parts = [];
    for (const file of files) {
      const url = await dataUrl(file);
      if (file.type.startsWith("image/")) {
        parts.push({ type: "image_url", image_url: { url } });
      } else {
        // a type the browser does not know: the server guesses it from the name
        parts.push({ type: "file", file: { filename: file.name, file_data: url } });
      }
    }
    return parts;
  }

  // What the sender's bubble shows of the parts: a picture small, a file by name.
  function show(bubble, parts) {
    for (const part of parts) {
      if (part.type === "image_url") {
        const image = document.createElement("img");
        image.src = part.image_url.url;
        image.alt = "your picture";
        image.className = "sent-image";
        bubble.append(image);
      } else {
        const line = document.createElement("span");
        line.className = "sent-file";
        line.textContent = `📄 ${part.file.filename}`;
        bubble.append(line);
      }
    }
  }

  function setup() {
    $("#attach").addEventListener("change", () => {
      add($("#attach").files);
      $("#attach").value = "";
    });
    $("#prompt").addEventListener("paste", (event) => {
      const files = event.clipboardData ? Array.from(event.clipboardData.files) : [];
      if (!files.length) return;  // text: pasted as usual
      event.preventDefault();
      add(files);
    });
  }

  return { setup, take, show, get count() { return chosen.length; } };
})();
