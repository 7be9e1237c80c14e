// The composer's "Insert a variable" menu: opened, it asks the server which variables
// the chosen audience's messages can read (GET /api/v1/campaigns/variables: name, phone
// and the attributes its contacts have, with how many have each) and lists them; picking
// one writes {{ variable }} where the cursor is in the message (or at its end when the
// message was not clicked into yet). Keyboard: the summary opens it, Tab walks the
// variables, Enter inserts, Escape closes it and goes back to the summary (gatecast.js).
"use strict";

(function () {
  const box = document.getElementById("var-insert");
  if (!box) { return; }
  const text = document.getElementById("f-text");
  let cursorKnown = false;
  text.addEventListener("focus", function () { cursorKnown = true; });

  // the audience of the form as the query the server takes
  function audienceQuery() {
    const spec = formSpec();
    const q = new URLSearchParams();
    if (spec.groups) {
      q.set("groups", String(Math.max(spec.groups.length, 1)));
    } else if (spec.audience && spec.audience.segment) {
      q.set("segment", spec.audience.segment);
    } else if (spec.audience) {
      [spec.audience.list].concat(spec.audience.lists || []).filter(Boolean).forEach(function (l) { q.append("list", l); });
    } else if (spec.list) {
      q.set("list", spec.list);
    }
    return q.toString();
  }

  function said(v, total) {
    if (v.contacts === null) { return v.description; }
    if (v.contacts >= total) { return "every contact has it"; }
    return v.contacts + " of " + total + " contacts have it: the others cannot get this message";
  }

  async function load() {
    const help = document.getElementById("var-help");
    const list = document.getElementById("var-list");
    help.textContent = "Looking up what the recipients have…";
    list.innerHTML = "";
    let got;
    try { got = await gcApi("GET", "/campaigns/variables?" + audienceQuery()); }
    catch (e) { help.textContent = "The variables could not be listed: " + e.message; return; }
    list.innerHTML = got.variables.map(function (v) {
      const partial = v.contacts !== null && v.contacts < got.contacts;
      return "<li><button type='button' class='var-item" + (partial ? " partial" : "") + "' data-var='" + gcEsc(v.name) + "'>" +
        "<code>{{ " + gcEsc(v.name) + " }}</code> <span class='muted'>" + gcEsc(said(v, got.contacts)) + "</span></button></li>";
    }).join("");
    help.textContent = "Each recipient's own value goes where the cursor is in the message.";
  }

  function insert(name) {
    const token = "{{ " + name + " }}";
    const end = cursorKnown ? text.selectionEnd : text.value.length;
    const start = cursorKnown ? text.selectionStart : end;
    text.setRangeText(token, start, end, "end");
    box.open = false;
    text.focus();
    text.dispatchEvent(new Event("input", { bubbles: true }));  // the preview follows
  }

  box.addEventListener("toggle", function () { if (box.open) { load(); } });
  document.getElementById("var-list").addEventListener("click", function (ev) {
    const item = ev.target.closest("button[data-var]");
    if (item) { insert(item.dataset.var); }
  });
})();
