// The campaign composer: the form <-> the campaign file (JSON for the API, TOML on its
// tab), the phone preview for one recipient, the final check and the next starts of a
// recurrence. Every rule is the server's; this script only gathers and shows.
"use strict";

const GC = JSON.parse(document.getElementById("composer-data").textContent);
const BUTTON_KINDS = [
  ["quick_reply", "Quick reply", "id", "Reply id", "Reply id"],
  ["cta_url", "Open a URL", "url", "URL (https://…)", "URL"],
  ["cta_call", "Call a number", "phone_number", "Phone number (+…)", "Phone number"],
  ["cta_copy", "Copy a code", "copy_code", "Code to copy", "Code to copy"],
];
let gcTab = "form";
let gcTomlShown = "";
let gcSeq = 0;

function $(id) { return document.getElementById(id); }
// an error in the campaign file's own terms: message.buttons[1].url, as the TOML says it
function gcProblem(e) {
  const errors = e && e.data && Array.isArray(e.data.errors) ? e.data.errors : [];
  if (!errors.length || !errors.some(function (x) { return x.path !== undefined; })) { return e.message; }
  return errors.map(function (x) {
    const where = x.path !== undefined ? x.path : (x.loc || []).filter(function (p) { return p !== "body"; }).join(".");
    return (where ? where + ": " : "") + x.msg;
  }).join("\n");
}
// --- errors in the form's words, on their fields ------------------------------------------
// the field of each campaign-file key (the form's label names it)
const FIELDS = {
  "name": "f-name", "list": "f-list", "groups": "f-groups", "audience": "f-segment", "audience.segment": "f-segment",
  "message.type": "f-type", "message.text": "f-text", "message.caption": "f-text",
  "message.media_url": "f-media", "message.filename": "f-filename", "message.title": "f-title",
  "message.subtitle": "f-subtitle", "message.footer": "f-footer", "message.button_text": "f-button-text",
  "message.buttons": "add-button", "message.sections": "add-section",
  "schedule.start": "f-start", "schedule.timezone": "f-tz", "timezone": "f-tz", "schedule.window": "f-win-from",
  "schedule.cron": "f-cron", "cron": "f-cron", "schedule.recipient_timezone": "f-recipient-tz",
  "pace.per_minute": "f-rate", "pace.delay_seconds": "f-dmin", "pace.daily_cap": "f-cap",
  "retry.max_attempts": "f-attempts", "retry.backoff_seconds": "f-backoff",
  "safety.max_failure_rate": "f-failrate", "safety.min_sample": "f-minsample",
  "safety.contact_cooldown_hours": "f-cooldown",
};
const BUTTON_FIELDS = { display_text: [".b-text", "Button text"], kind: [".b-kind", "Button kind"] };
const ROW_FIELDS = { title: [".r-title", "Row title"], row_id: [".r-id", "Row id"], description: [".r-desc", "Row description"] };
// a label's own words, without its hints in grey: "Start", "Messages per minute"
function gcLabelOf(el) {
  if (el.tagName === "BUTTON") { return el.textContent.replace(/^Add an? /, "").replace(/^./, function (c) { return c.toUpperCase(); }) + "s"; }
  const label = document.querySelector("label[for='" + el.id + "']");
  if (!label) { return el.id; }
  const copy = label.cloneNode(true);
  copy.querySelectorAll(".muted, input").forEach(function (x) { x.remove(); });
  return copy.textContent.replace(/\s+/g, " ").trim();
}
// the kinds of buttons as the form names them ("required for a Quick reply button")
function gcKindWords(msg) {
  BUTTON_KINDS.forEach(function (k) { msg = msg.split(k[0]).join(k[1]); });
  return msg;
}
// one error of the API: where it is in the form (the field, or null) and its words there,
// counted from 1 as a person counts ("Button 2, URL: not a URL ...")
function gcPlace(err) {
  const loc = (err.loc || []).filter(function (p) { return p !== "body" && p !== "query"; });
  const msg = gcKindWords(String(err.msg || ""));
  if (loc[0] === "message" && loc[1] === "buttons" && typeof loc[2] === "number") {
    const row = gcSentButtonRows()[loc[2]];
    const what = "Button " + (loc[2] + 1);
    if (!row) { return { el: null, text: what + ": " + msg }; }
    let sel = BUTTON_FIELDS[loc[3]];
    if (!sel && loc[3] !== undefined) {
      const kind = BUTTON_KINDS.find(function (k) { return k[0] === row.querySelector(".b-kind").value; });
      sel = [".b-value", kind[4]];
    }
    return sel ? { el: row.querySelector(sel[0]), text: what + ", " + sel[1] + ": " + msg } : { el: row.querySelector(".b-text"), text: what + ": " + msg };
  }
  if (loc[0] === "message" && loc[1] === "sections" && typeof loc[2] === "number") {
    const section = document.querySelectorAll("#sections .section-row")[loc[2]];
    const what = "Section " + (loc[2] + 1);
    if (!section) { return { el: null, text: what + ": " + msg }; }
    if (loc[3] === "rows" && typeof loc[4] === "number") {
      const row = section.querySelectorAll(".list-row")[loc[4]];
      const field = ROW_FIELDS[loc[5]];
      const rowWhat = what + ", row " + (loc[4] + 1);
      if (row && field) { return { el: row.querySelector(field[0]), text: rowWhat + ", " + field[1] + ": " + msg }; }
      return { el: section.querySelector(".s-add"), text: rowWhat + ": " + msg };
    }
    if (loc[3] === "title") { return { el: section.querySelector(".s-title"), text: what + ", Section title: " + msg }; }
    return { el: section.querySelector(".s-add"), text: what + ": " + msg };
  }
  if (loc[0] === "pace" && loc[1] === "delay_seconds" && loc[2] === 1) { return { el: $("f-dmax"), text: gcLabelOf($("f-dmax")) + ": " + msg }; }
  if (loc[0] === "instances") {
    const box = document.querySelector("input[name=instances]");
    return { el: box, text: "Senders: " + msg };
  }
  let key = loc.filter(function (p) { return typeof p !== "number"; }).join(".");
  while (key && !FIELDS[key]) { key = key.split(".").slice(0, -1).join("."); }
  let el = key ? $(FIELDS[key]) : null;
  if (!el) { return { el: null, text: msg }; }
  if (el.offsetParent === null && loc[0] === "schedule") {
    // the crontab box shows only for "advanced": the repeat picker is the field then
    const picked = document.querySelector("input[name=repeat]:checked");
    if (picked) { return { el: picked, text: "Repeat: " + msg }; }
  }
  const label = el.id === "f-win-from" ? "Window" : gcLabelOf(el);
  return { el: el, text: label + ": " + msg };
}
function gcClearFieldErrors() {
  document.querySelectorAll("#composer .field-error").forEach(function (p) { p.remove(); });
  document.querySelectorAll("#composer [aria-invalid]").forEach(function (el) {
    el.removeAttribute("aria-invalid");
    const ids = (el.getAttribute("aria-describedby") || "").split(" ").filter(function (i) { return i && !i.startsWith("err-"); });
    if (ids.length) { el.setAttribute("aria-describedby", ids.join(" ")); } else { el.removeAttribute("aria-describedby"); }
  });
}
let gcErrSeq = 0;
let gcTouched = new Set();
let gcAllErrors = false;  // after a create, a save or a preview: every field's error shows
// the API's errors on their fields (only on fields already touched, unless ``all``):
// aria-invalid, the words under the field (aria-describedby); returns the places
function gcMarkFields(e, all) {
  gcClearFieldErrors();
  const errors = e && e.data && Array.isArray(e.data.errors) ? e.data.errors : [];
  const places = errors.map(gcPlace);
  places.forEach(function (p) {
    if (!p.el || (!all && !gcTouched.has(p.el.id))) { return; }
    gcErrSeq += 1;
    const note = document.createElement("p");
    note.className = "field-error error small";
    note.id = "err-" + gcErrSeq;
    note.textContent = p.text;
    p.el.setAttribute("aria-invalid", "true");
    const ids = (p.el.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
    ids.push(note.id);
    p.el.setAttribute("aria-describedby", ids.join(" "));
    const boxed = p.el.type === "checkbox" || p.el.type === "radio";
    const after = boxed ? p.el.closest("fieldset") : p.el;
    after.insertAdjacentElement(boxed ? "beforeend" : "afterend", note);
  });
  return places;
}
// an error of the form as text in its words ("Name: must not be empty"), fields marked
function gcFormProblem(e, all) {
  const places = gcMarkFields(e, all);
  return places.length ? places.map(function (p) { return p.text; }).join("\n") : e.message;
}
// the same words, no field marked (the final check marks them: one owner, no flicker)
function gcWords(e) {
  const errors = e && e.data && Array.isArray(e.data.errors) ? e.data.errors : [];
  return errors.length ? errors.map(function (x) { return gcPlace(x).text; }).join("\n") : e.message;
}
// the summary of a refused create / save / preview: each problem a link to its field
function gcShowProblems(e, where) {
  gcAllErrors = true;
  const places = gcMarkFields(e, true);
  const box = $(where);
  box.className = "error";
  if (!places.length) { box.textContent = e.message; return; }
  box.innerHTML = "<span>" + places.length + (places.length === 1 ? " problem" : " problems") + " to fix:</span><ul class='error-summary'>" +
    places.map(function (p) {
      return "<li>" + (p.el && p.el.id ? "<a href='#" + gcEsc(p.el.id) + "' data-field='" + gcEsc(p.el.id) + "'>" + gcEsc(p.text) + "</a>" : gcEsc(p.text)) + "</li>";
    }).join("") + "</ul>";
}
function gcFocusField(ev) {
  const a = ev.target.closest("a[data-field]");
  if (!a) { return; }
  ev.preventDefault();
  const el = $(a.dataset.field);
  if (el) { el.scrollIntoView({ block: "center" }); el.focus(); }
}

function val(id) { return $(id).value; }
function num(id) { return $(id).value === "" ? undefined : Number($(id).value); }
function chosen(name) { const r = document.querySelector("input[name=" + name + "]:checked"); return r ? r.value : ""; }

// --- the editors of buttons and list sections ---------------------------------------------
let gcRowCount = 0;
function gcField(label, cls, value, type) {
  gcRowCount += 1;
  const id = "x-" + gcRowCount;
  return "<div><label for='" + id + "'>" + gcEsc(label) + "</label><input type='" + (type || "text") + "' id='" + id +
    "' class='" + cls + "' value='" + gcEsc(value || "") + "'></div>";
}
function gcAddButton(b) {
  b = b || {};
  const kind = b.kind || "quick_reply";
  const spec = BUTTON_KINDS.find(function (k) { return k[0] === kind; }) || BUTTON_KINDS[0];
  const box = document.createElement("div");
  box.className = "editor-row button-row";
  gcRowCount += 1;
  const kid = "x-" + gcRowCount;
  box.innerHTML = "<div><label for='" + kid + "'>Button kind</label><select id='" + kid + "' class='b-kind'>" +
    BUTTON_KINDS.map(function (k) { return "<option value='" + k[0] + "'" + (k[0] === kind ? " selected" : "") + ">" + k[1] + "</option>"; }).join("") +
    "</select></div>" + gcField("Button text", "b-text", b.display_text) + gcField(spec[3], "b-value", b[spec[2]]) +
    "<button type='button' class='secondary b-remove'>Remove button</button>";
  box.querySelector(".b-kind").addEventListener("change", function () { gcButtonKind(box); gcButtonKinds(); gcChanged(); });
  box.querySelector(".b-remove").addEventListener("click", function () { box.remove(); gcChanged(); });
  $("buttons").appendChild(box);
  gcButtonKinds();
  return box;
}
function gcButtonKind(box) {
  const kind = box.querySelector(".b-kind").value;
  const spec = BUTTON_KINDS.find(function (k) { return k[0] === kind; });
  box.querySelector(".b-value").previousElementSibling.textContent = spec[3];
}
function gcButtonKinds() {
  // a legacy template has quick reply buttons only (the campaign file's rule): another
  // kind's button is kept in the form, marked as not sent, never turned into a quick reply
  const template = val("f-type") === "template";
  document.querySelectorAll("#buttons .button-row").forEach(function (row) {
    const left = template && row.querySelector(".b-kind").value !== "quick_reply";
    row.classList.toggle("left-out", left);
    let note = row.querySelector(".b-left-out");
    if (left && !note) {
      note = document.createElement("p");
      note.className = "b-left-out note small";
      note.textContent = "Not sent: a legacy template has quick reply buttons only (choose Quick reply to send it).";
      row.appendChild(note);
    } else if (!left && note) { note.remove(); }
  });
}
// the buttons formSpec sends: all of them, but a legacy template's quick replies only
function gcSentButtonRows() {
  const rows = Array.from(document.querySelectorAll("#buttons .button-row"));
  return rows.filter(function (row) { return !row.classList.contains("left-out"); });
}
function gcAddSection(s) {
  s = s || {};
  const box = document.createElement("fieldset");
  box.className = "editor-row section-row";
  box.innerHTML = "<legend>Section</legend>" + gcField("Section title", "s-title", s.title) +
    "<div class='s-rows'></div><div class='actions'><button type='button' class='secondary s-add'>Add a row</button>" +
    "<button type='button' class='secondary s-remove'>Remove section</button></div>";
  box.querySelector(".s-add").addEventListener("click", function () { gcAddRow(box); gcChanged(); });
  box.querySelector(".s-remove").addEventListener("click", function () { box.remove(); gcChanged(); });
  $("sections").appendChild(box);
  (s.rows && s.rows.length ? s.rows : [{}]).forEach(function (r) { gcAddRow(box, r); });
  return box;
}
function gcAddRow(section, r) {
  r = r || {};
  const box = document.createElement("div");
  box.className = "editor-row list-row";
  box.innerHTML = gcField("Row title", "r-title", r.title) + gcField("Row id", "r-id", r.row_id) +
    gcField("Row description", "r-desc", r.description) + "<button type='button' class='secondary r-remove'>Remove row</button>";
  box.querySelector(".r-remove").addEventListener("click", function () { box.remove(); gcChanged(); });
  section.querySelector(".s-rows").appendChild(box);
  return box;
}

// --- form -> campaign file ------------------------------------------------------------------
function formSpec() {
  const type = val("f-type");
  const message = { type: type };
  const text = val("f-text");
  if (type === "media") {
    if (text) { message.caption = text; }
    message.media_url = val("f-media");
    if (val("f-filename")) { message.filename = val("f-filename"); }
  } else {
    message.text = text;
  }
  if (type === "interactive" || type === "list") { if (val("f-title")) { message.title = val("f-title"); } }
  if (type === "interactive" && val("f-subtitle")) { message.subtitle = val("f-subtitle"); }
  if (type !== "text" && type !== "media" && val("f-footer")) { message.footer = val("f-footer"); }
  if (type === "interactive" || type === "template") {
    message.buttons = gcSentButtonRows().map(function (row) {
      const kind = row.querySelector(".b-kind").value;
      const key = BUTTON_KINDS.find(function (k) { return k[0] === kind; })[2];
      const b = { kind: kind, display_text: row.querySelector(".b-text").value };
      b[key] = row.querySelector(".b-value").value;
      return b;
    });
  }
  if (type === "list") {
    message.button_text = val("f-button-text");
    message.sections = Array.from(document.querySelectorAll("#sections .section-row")).map(function (s) {
      return {
        title: s.querySelector(".s-title").value,
        rows: Array.from(s.querySelectorAll(".list-row")).map(function (r) {
          const row = { title: r.querySelector(".r-title").value, row_id: r.querySelector(".r-id").value };
          if (r.querySelector(".r-desc").value) { row.description = r.querySelector(".r-desc").value; }
          return row;
        }),
      };
    });
  }
  const spec = { name: val("f-name"), message: message };
  const to = chosen("to");
  if (to === "list") { spec.list = val("f-list"); }
  if (to === "segment") { spec.audience = { segment: val("f-segment") }; }
  if (to === "groups") { spec.groups = val("f-groups").split(/\s+/).filter(Boolean); }
  if (to === "audience" && GC.audience) { spec.audience = GC.audience; }
  const ticked = Array.from(document.querySelectorAll("input[name=instances]:checked")).map(function (e) { return e.value; });
  if (ticked.length) { spec.instances = ticked; }
  const schedule = { timezone: val("f-tz") || "UTC" };
  if (val("f-start")) { schedule.start = val("f-start").length === 16 ? val("f-start") + ":00" : val("f-start"); }
  if (val("f-win-from") || val("f-win-to")) { schedule.window = [val("f-win-from"), val("f-win-to")]; }
  if (chosen("repeat") !== "once" && val("f-cron").trim()) { schedule.cron = val("f-cron").trim(); }
  if ($("f-recipient-tz").checked) { schedule.recipient_timezone = true; }
  if (GC.grace !== undefined) { schedule.missed_grace_minutes = GC.grace; }
  spec.schedule = schedule;
  spec.pace = { per_minute: num("f-rate"), delay_seconds: [num("f-dmin"), num("f-dmax")] };
  if (val("f-cap")) { spec.pace.daily_cap = num("f-cap"); }
  spec.retry = { max_attempts: num("f-attempts"), backoff_seconds: num("f-backoff") };
  spec.safety = { max_failure_rate: num("f-failrate"), min_sample: num("f-minsample") };
  if (val("f-cooldown") !== "") { spec.safety.contact_cooldown_hours = num("f-cooldown"); }
  return spec;
}

// --- campaign file -> form ------------------------------------------------------------------
function setVal(id, v) { $(id).value = v === undefined || v === null ? "" : v; }
function fillForm(spec) {
  const m = spec.message || { type: "text" };
  setVal("f-name", spec.name);
  let to = "list";
  if (spec.groups && spec.groups.length) { to = "groups"; setVal("f-groups", spec.groups.join("\n")); }
  else if (spec.audience && spec.audience.segment) { to = "segment"; gcEnsureOption("f-segment", spec.audience.segment); }
  else if (spec.audience) { to = "audience"; }
  else if (spec.list) { gcEnsureOption("f-list", spec.list); }
  // an audience of lists, tags and values is kept as the file says it (the TOML tab edits it)
  GC.audience = spec.audience && !spec.audience.segment ? spec.audience : null;
  $("f-to-audience-label").classList.toggle("hidden", !GC.audience);
  $("f-audience-text").textContent = GC.audience ? JSON.stringify(GC.audience) : "";
  $("f-to-" + to).checked = true;
  document.querySelectorAll("input[name=instances]").forEach(function (e) { e.checked = (spec.instances || []).includes(e.value); });
  setVal("f-type", m.type);
  setVal("f-text", m.type === "media" ? (m.caption || m.text) : m.text);
  setVal("f-media", m.media_url); setVal("f-filename", m.filename);
  setVal("f-title", m.title); setVal("f-subtitle", m.subtitle); setVal("f-footer", m.footer);
  setVal("f-button-text", m.button_text);
  $("buttons").innerHTML = ""; (m.buttons || []).forEach(gcAddButton);
  $("sections").innerHTML = ""; (m.sections || []).forEach(gcAddSection);
  const s = spec.schedule || {};
  setVal("f-start", s.start ? String(s.start).slice(0, 16) : "");
  if (s.timezone) { gcEnsureOption("f-tz", s.timezone); }
  setVal("f-win-from", s.window ? s.window[0].slice(0, 5) : ""); setVal("f-win-to", s.window ? s.window[1].slice(0, 5) : "");
  setVal("f-cron", s.cron); $("f-recipient-tz").checked = !!s.recipient_timezone;
  gcScheduleFill(s.cron);
  GC.grace = s.missed_grace_minutes;
  const p = spec.pace || {};
  setVal("f-rate", p.per_minute !== undefined ? p.per_minute : 20);
  setVal("f-dmin", p.delay_seconds ? p.delay_seconds[0] : 5); setVal("f-dmax", p.delay_seconds ? p.delay_seconds[1] : 15);
  setVal("f-cap", p.daily_cap === undefined ? 500 : p.daily_cap);
  const r = spec.retry || {};
  setVal("f-attempts", r.max_attempts || 4); setVal("f-backoff", r.backoff_seconds || 30);
  const sf = spec.safety || {};
  setVal("f-failrate", sf.max_failure_rate || 0.5); setVal("f-minsample", sf.min_sample || 20);
  setVal("f-cooldown", sf.contact_cooldown_hours);
  gcKind = null; gcKindChanged(); gcToChanged();
}
function gcEnsureOption(id, value) {
  const sel = $(id);
  if (!Array.from(sel.options).some(function (o) { return o.value === value; })) {
    const o = document.createElement("option"); o.value = value; o.textContent = value; sel.appendChild(o);
  }
  sel.value = value;
}

// --- what shows for the kind and the audience chosen ----------------------------------------
// what each kind sends besides its text (the campaign file's fields of that type)
const KIND_PARTS = {
  text: [],
  media: ["f-media", "f-filename"],
  interactive: ["f-title", "f-subtitle", "f-footer", "buttons"],
  template: ["f-footer", "buttons"],
  list: ["f-title", "f-footer", "f-button-text", "sections"],
};
const KIND_NAMES = { text: "a text message", media: "a media message", interactive: "an interactive message", template: "a legacy template", list: "a list message" };
let gcKind = null;
// the parts filled in for the kind left that the new kind does not send: kept in the
// form (switching back brings them back), said in #kind-note; nothing empty is added
function gcKindDrops(from, to) {
  const dropped = [];
  KIND_PARTS[from].forEach(function (part) {
    if (KIND_PARTS[to].includes(part)) { return; }
    if (part === "buttons") {
      const n = document.querySelectorAll("#buttons .button-row").length;
      if (n) { dropped.push(n + " button" + (n === 1 ? "" : "s")); }
    } else if (part === "sections") {
      const n = document.querySelectorAll("#sections .section-row").length;
      if (n) { dropped.push(n + " section" + (n === 1 ? "" : "s") + " of the list"); }
    } else if ($(part).value.trim()) {
      dropped.push(gcLabelOf($(part)));
    }
  });
  if (to === "template" && KIND_PARTS[from].includes("buttons")) {
    const others = Array.from(document.querySelectorAll("#buttons .button-row")).filter(function (row) {
      return row.querySelector(".b-kind").value !== "quick_reply";
    }).map(function (row) {
      const kind = BUTTON_KINDS.find(function (k) { return k[0] === row.querySelector(".b-kind").value; });
      return "'" + (row.querySelector(".b-text").value || "(no text)") + "' (" + kind[1] + ")";
    });
    if (others.length) {
      dropped.push("the button" + (others.length === 1 ? " " : "s ") + others.join(", ") +
        ": a legacy template has quick reply buttons only, so " + (others.length === 1 ? "it is" : "they are") +
        " not sent unless you change " + (others.length === 1 ? "its" : "their") + " kind to Quick reply");
    }
  }
  return dropped;
}
function gcKindChanged() {
  const type = val("f-type");
  const from = gcKind;
  gcKind = type;
  document.querySelectorAll("[data-kind]").forEach(function (el) {
    el.classList.toggle("hidden", !el.dataset.kind.split(" ").includes(type));
  });
  $("f-text-label").textContent = type === "media" ? "Caption" : "Message";
  gcButtonKinds();
  const note = $("kind-note");
  if (!note) { return; }
  const dropped = from && from !== type ? gcKindDrops(from, type) : [];
  note.textContent = dropped.length
    ? "Switched to " + KIND_NAMES[type] + ". Not sent with it (kept in the form: switch back to use them again): " + dropped.join("; ") + "."
    : "";
  note.classList.toggle("hidden", !dropped.length);
}
function gcToChanged() {
  const to = chosen("to");
  document.querySelectorAll("[data-to]").forEach(function (el) { el.classList.toggle("hidden", el.dataset.to !== to); });
}

// --- the TOML tab ---------------------------------------------------------------------------
async function gcShowTab(tab) {
  if (tab === gcTab) { return; }
  if (tab === "toml") {
    if (!(await gcScheduleSync(null))) { return; }
    try {
      const res = await gcApi("POST", "/campaigns/to-toml", formSpec());
      $("toml-text").value = res.toml; gcTomlShown = res.toml;
      gcShow("toml-msg", "", false);
    } catch (e) { gcShowProblems(e, "campaign-msg"); return; }
  } else if ($("toml-text").value !== gcTomlShown && !(await gcApplyToml())) {
    return;
  }
  gcTab = tab;
  $("campaign-form").classList.toggle("hidden", tab !== "form");
  $("toml-pane").classList.toggle("hidden", tab !== "toml");
  $("tab-form").setAttribute("aria-selected", String(tab === "form"));
  $("tab-toml").setAttribute("aria-selected", String(tab === "toml"));
}
async function gcApplyToml() {
  try {
    const res = await gcApi("POST", "/campaigns/from-toml", { toml: $("toml-text").value });
    fillForm(res.spec);
    gcTomlShown = $("toml-text").value;
    gcShow("toml-msg", "Applied to the form.", false);
    gcChanged();
    return true;
  } catch (e) { gcShow("toml-msg", gcProblem(e), true); return false; }
}
async function gcCurrentSpec() {
  if (gcTab === "toml" && $("toml-text").value !== gcTomlShown && !(await gcApplyToml())) { return null; }
  if (gcTab === "form" && !(await gcScheduleSync(null))) {
    gcShow("campaign-msg", "Schedule: " + $("cron-next").textContent, true);
    return null;
  }
  return formSpec();
}

// --- the phone ------------------------------------------------------------------------------
function gcText(s) { return gcEsc(s).replace(/\n/g, "<br>"); }
const BUTTON_ICONS = { quick_reply: "↩", cta_url: "↗", cta_call: "✆", cta_copy: "❐" };
function gcMedia(c) {
  const url = c.media_url || "";
  const path = url.split("?")[0].toLowerCase();
  const name = c.filename || path.split("/").pop() || "file";
  if (!c.filename && /\.(jpe?g|png|gif|webp)$/.test(path)) {
    return "<div class='pv-media pv-image'><img src='" + gcEsc(url) + "' alt='image: " + gcEsc(name) + "' loading='lazy'></div>";
  }
  if (!c.filename && /\.(mp4|3gp|mov|webm)$/.test(path)) {
    return "<div class='pv-media pv-video' role='img' aria-label='video: " + gcEsc(name) + "'>▶ " + gcEsc(name) + "</div>";
  }
  const ext = (name.indexOf(".") > 0 ? name.split(".").pop() : "file").slice(0, 4).toUpperCase();
  return "<div class='pv-media pv-file'><span class='pv-file-icon' aria-hidden='true'>" + gcEsc(ext) + "</span><span class='pv-file-name'>" + gcEsc(name) + "</span></div>";
}
function gcBubble(c) {
  let out = "<div class='bubble' data-kind='" + gcEsc(c.type) + "'>";
  if (c.type === "media") { out += gcMedia(c); }
  if (c.title) { out += "<div class='pv-title'>" + gcText(c.title) + "</div>"; }
  if (c.subtitle) { out += "<div class='pv-subtitle'>" + gcText(c.subtitle) + "</div>"; }
  const body = c.type === "media" ? c.caption : c.text;
  if (body) { out += "<div class='pv-text'>" + gcText(body) + "</div>"; }
  if (c.footer) { out += "<div class='pv-footer'>" + gcText(c.footer) + "</div>"; }
  out += "</div>";
  (c.buttons || []).forEach(function (b) {
    out += "<div class='pv-button' data-kind='" + gcEsc(b.kind || "quick_reply") + "'><span aria-hidden='true'>" +
      (BUTTON_ICONS[b.kind || "quick_reply"] || "") + "</span> " + gcText(b.display_text) + "</div>";
  });
  if (c.type === "list") {
    out += "<button type='button' class='pv-button pv-list-open' aria-expanded='true' onclick='gcToggleSheet(this)'>☰ " + gcText(c.button_text) + "</button>";
    out += "<div class='pv-sheet'><div class='pv-sheet-title'>" + gcText(c.button_text) + "</div>" +
      (c.sections || []).map(function (s) {
        return "<div class='pv-section'>" + (s.title ? "<div class='pv-section-title'>" + gcText(s.title) + "</div>" : "") +
          s.rows.map(function (r) {
            return "<div class='pv-row'><span class='pv-row-title'>" + gcText(r.title) + "</span>" +
              (r.description ? "<span class='pv-row-desc'>" + gcText(r.description) + "</span>" : "") + "</div>";
          }).join("") + "</div>";
      }).join("") + "</div>";
  }
  return out;
}
function gcToggleSheet(btn) {
  const sheet = btn.nextElementSibling;
  sheet.classList.toggle("hidden");
  btn.setAttribute("aria-expanded", String(!sheet.classList.contains("hidden")));
}
function gcShowPhone(p) {
  GC.shown = p.contact_id;  // a test send renders for the contact the phone shows
  $("pv-to").textContent = (p.name || p.target || "no recipient yet") + (p.name && p.target ? " · " + p.target : "");
  const chat = $("pv-chat");
  if (p.content) {
    chat.innerHTML = gcBubble(p.content);
  } else {
    chat.innerHTML = "<div class='bubble pv-unrendered'>Not sent to this recipient: " + gcEsc(p.error || "") + "</div>";
  }
  const who = p.name || p.target || "this recipient";
  $("pv-missing").textContent = p.missing.length
    ? "Would not render for " + who + ": no value for " + p.missing.join(", ") + "."
    : (p.opted_out ? who + " opted out: not sent." : "");
  const sel = $("pv-contact");
  const current = sel.value;
  sel.innerHTML = "<option value=''>the audience's first recipient</option>" + p.candidates.filter(function (c) { return c.contact_id; }).map(function (c) {
    return "<option value='" + c.contact_id + "'>" + gcEsc((c.name || c.target) + " · " + c.target) + "</option>";
  }).join("");
  if (current && !Array.from(sel.options).some(function (o) { return o.value === current; })) {
    const o = document.createElement("option"); o.value = current; o.textContent = who + " · " + p.target; sel.appendChild(o);
  }
  sel.value = current;
  const variants = p.variants.length > 1 ? p.variants : [];
  $("pv-variants-box").classList.toggle("hidden", !variants.length);
  $("pv-variant-count").textContent = variants.length;
  $("pv-variants").innerHTML = variants.map(function (v) { return "<li>" + gcText(v.text || v.caption || "") + "</li>"; }).join("");
}

// --- the schedule picker: once, every day, chosen weekdays, monthly, or crontab --------------
// The server writes the picker's shape as the campaign file's crontab (schedule.cron), reads
// a stored crontab back into the picker, and lists the next runs from the start: one rule,
// scheduler/recurrence.py. This only gathers the fields and shows the answer.
const REPEAT_LABELS = { times: "At", days: "Weekdays", day: "Day of the month", cron: "Crontab", timezone: "Timezone", start: "Start", every: "When" };
let gcScheduleRead = false;
function gcRepeatChanged() {
  const mode = chosen("repeat");
  document.querySelectorAll("#schedule [data-repeat]").forEach(function (e) {
    e.classList.toggle("hidden", !e.dataset.repeat.split(" ").includes(mode));
  });
  $("f-start-label").innerHTML = mode === "once"
    ? "Send at <span class='muted'>(empty: as soon as created)</span>"
    : "Starting from <span class='muted'>(empty: now)</span>";
}
function gcScheduleFill(cron) {
  // a stored recurrence: shown as crontab until the server says which shape it fits
  $(cron ? "f-rep-advanced" : "f-rep-once").checked = true;
  gcScheduleRead = !!cron;
  gcRepeatChanged();
}
function gcRepeatShow(r) {
  $("f-rep-" + (r.every === "day" && !r.days.length ? "day" : r.every)).checked = true;
  setVal("f-rep-times", r.times.join(", "));
  if (r.day) { setVal("f-rep-dom", r.day); }
  document.querySelectorAll("input[name=repeat-days]").forEach(function (e) { e.checked = r.days.includes(e.value); });
  gcRepeatChanged();
}
function gcScheduleProblem(e) {
  const errors = e && e.data && Array.isArray(e.data.errors) ? e.data.errors : [];
  if (!errors.length) { return e.message; }
  return errors.map(function (x) {
    const where = String(x.path || (x.loc || []).slice(-1)[0] || "").split(".").pop();
    return (REPEAT_LABELS[where] ? REPEAT_LABELS[where] + ": " : "") + x.msg;
  }).join("\n");
}
// Brings #f-cron in line with the picker and lists the next runs; false when the schedule is
// not valid (the reason shown). ``seq``: the refresh it belongs to (null: always shown).
async function gcScheduleSync(seq) {
  const mode = chosen("repeat");
  const tz = val("f-tz") || "UTC";
  const start = val("f-start");
  const shown = function () { return seq === null || seq === gcSeq; };
  if (mode === "once" || (mode === "advanced" && !val("f-cron").trim())) {
    if (shown()) {
      gcShow("cron-next", start ? "Sends once, at " + start.replace("T", " ") + " " + tz + "." : "Sends once, as soon as it is created.", false);
    }
    return true;
  }
  const q = new URLSearchParams({ timezone: tz });
  if (start) { q.set("start", start); }
  if (mode === "advanced") {
    q.set("cron", val("f-cron").trim());
  } else {
    q.set("every", mode);
    q.set("times", val("f-rep-times"));
    if (mode === "week") {
      q.set("days", Array.from(document.querySelectorAll("input[name=repeat-days]:checked")).map(function (e) { return e.value; }).join(","));
    }
    if (mode === "month") { q.set("day", val("f-rep-dom")); }
  }
  let o;
  try {
    o = await gcApi("GET", "/campaigns/occurrences?" + q.toString());
  } catch (e) {
    if (shown()) { gcShow("cron-next", gcScheduleProblem(e), true); }
    return false;
  }
  if (mode !== "advanced") { setVal("f-cron", o.cron); }
  if (mode === "advanced" && gcScheduleRead && o.repeat) { gcRepeatShow(o.repeat); }
  gcScheduleRead = false;
  if (shown()) {
    $("cron-next").className = "muted small";
    $("cron-next").innerHTML = "<span id='repeat-summary'>" + gcEsc(o.summary + " (" + tz + ")") + "</span>. Next runs" +
      (start ? " from " + gcEsc(start.replace("T", " ")) : "") + ":<ol id='cron-list'>" +
      o.occurrences.map(function (t) { return "<li>" + gcEsc(gcLocal(t, tz)) + "</li>"; }).join("") + "</ol>" +
      (o.occurrences.length ? "" : "<p>No run ahead.</p>") +
      (mode !== "advanced" ? "<p>As crontab: <code id='repeat-cron'>" + gcEsc(o.cron) + "</code></p>" : "");
  }
  return true;
}

// --- live: preview, final check, next starts (debounced) -----------------------------------
let gcTimer = null;
function gcChanged() {
  clearTimeout(gcTimer);
  gcTimer = setTimeout(gcRefresh, 400);
}
function gcLocal(iso, tz) {
  try {
    return new Date(iso).toLocaleString("en-GB", { timeZone: tz, weekday: "short", year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  } catch (e) { return iso; }
}
// one refresh at a time: the final check reads every recipient (as a create does), so a
// change made while one runs waits for it and then refreshes once
let gcRunning = false;
let gcAgain = false;
async function gcRefresh() {
  if (gcRunning) { gcAgain = true; return; }
  gcRunning = true;
  try { await gcRefreshNow(); } finally { gcRunning = false; }
  if (gcAgain) { gcAgain = false; gcRefresh(); }
}
function gcStartsNow(spec) { return !spec.schedule || (!spec.schedule.start && !spec.schedule.cron); }
async function gcRefreshNow() {
  const seq = ++gcSeq;
  await gcScheduleSync(seq);
  const spec = formSpec();
  if ($("form-create")) { $("form-create").textContent = gcStartsNow(spec) ? "Create and send now" : "Create and schedule"; }
  const contact = val("pv-contact");
  const body = { spec: spec, contact_id: contact ? Number(contact) : null, campaign_id: GC.mode === "edit" ? GC.source : null };
  const jobs = [
    gcApi("POST", "/campaigns/preview/recipient", body).then(function (p) {
      if (seq === gcSeq) { gcShowPhone(p); }
    }, function (e) {
      if (seq !== gcSeq) { return; }
      $("pv-chat").innerHTML = "<div class='bubble pv-unrendered'>" + gcText(gcWords(e)) + "</div>";
      $("pv-missing").textContent = "";
    }),
    gcApi("POST", "/campaigns/check", spec).then(function (c) {
      if (seq !== gcSeq) { return; }
      gcShow("final-check", c.sentence, false);
      $("final-check").dataset.messages = c.messages;
      $("final-unrenderable").textContent = c.unrenderable_words ? "Cannot get this message: " + c.unrenderable_words + "." : "";
      gcClearFieldErrors();
      // the problems a create listed are fixed: their list goes too
      if ($("campaign-msg").querySelector(".error-summary")) { gcShow("campaign-msg", "", false); }
    }, function (e) {
      if (seq !== gcSeq) { return; }
      gcShow("final-check", gcFormProblem(e, gcAllErrors), true);
      $("final-unrenderable").textContent = "";
    }),
  ];
  await Promise.all(jobs);
  document.body.dataset.composerRefreshed = String(seq);
}

// --- create, preview the first recipients, save an edit -------------------------------------
function showPreview(p) {
  $("preview-box").classList.remove("hidden");
  const n = p.recipients_checked !== undefined ? p.recipients_checked : p.recipients;
  $("preview-summary").textContent =
    n + " recipient(s)" + (p.opted_out ? ", " + p.opted_out + " opted out (skipped)" : "") +
    (p.unrenderable_count ? ", " + p.unrenderable_count + " cannot be rendered (skipped)" : "");
  $("preview-variety").textContent = (p.variety && p.variety.warning) || "";
  $("preview-items").innerHTML = p.preview.map(function (m) {
    return "<div class='preview-item'><b>" + gcEsc(m.name || m.target) + "</b> <span class='muted'>" + gcEsc(m.target) + "</span>" +
      (m.variant ? " <span class='badge'>variant " + gcEsc(m.variant) + "</span>" : "") +
      "<div class='phone-chat mini'>" + gcBubble(m.content) + "</div></div>";
  }).join("");
  $("preview-unrenderable").innerHTML = (p.unrenderable_words ? "<p>Cannot get this message: " + gcEsc(p.unrenderable_words) + ".</p>" : "") +
    p.unrenderable.slice(0, 10).map(function (u) { return gcEsc(u.target + ": " + u.reason); }).join("<br>");
}
// Creating sends the Idempotency-Key rendered with this page (one per form): a second
// submit of the same form, even one that gets past the disabled buttons, replays the
// first answer instead of creating a second campaign.
const BUTTONS = ["form-preview", "form-create", "form-save", "toml-preview", "toml-create"];
let created = false;
async function submit(path, body, previewOnly, keyField, method) {
  if (created) { return; }
  const buttons = BUTTONS.map($).filter(Boolean);
  await gcWhileBusy(buttons, async function () {
    gcShow("campaign-msg", previewOnly ? "" : "Saving…", false);
    try {
      const headers = previewOnly || !keyField ? {} : { "Idempotency-Key": $(keyField).value };
      const res = await gcApi(method || "POST", path, body, headers);
      showPreview(res);
      if (previewOnly) { gcShow("campaign-msg", "Preview only: nothing was stored.", false); return; }
      created = true;
      gcShow("campaign-msg", "Campaign " + res.id + " is " + res.state + (method === "PUT" ? ": changes saved." : "."), false);
      // a low-variety warning stays readable before the campaign's page opens
      const wait = res.variety && res.variety.warning ? 4000 : 700;
      setTimeout(function () { location.href = "/campaigns/" + res.id; }, wait);
    } catch (e) {
      // a campaign that would send nothing: who lacks what, in the server's words
      if (e.data && e.data.code === "nothing_renders") { gcShow("campaign-msg", "Not created: " + e.data.detail + ".", true); }
      else { gcShowProblems(e, "campaign-msg"); }
    }
  });
  if (created) { buttons.forEach(function (b) { b.disabled = true; }); }
}
async function submitForm(previewOnly) {
  if (created) { return; }
  const spec = await gcCurrentSpec();
  if (spec === null) { return; }
  if (previewOnly) { return submit("/campaigns/preview", spec, true, "form-key"); }
  return gcAskFirst(spec, function () { return submit("/campaigns", spec, false, "form-key"); });
}

// --- ask before a create that starts sending at once or skips recipients -------------------
// The final check of the file about to be created (every recipient, as the create reads
// them): a start of "now", or recipients whose message does not render, are said and
// confirmed first. When none renders the create itself refuses, saying who lacks what.
let gcPending = null;
async function gcAskFirst(spec, go) {
  gcHideConfirm();
  let c = null;
  // the buttons wait while the check runs: a double click asks (or creates) once
  const ran = await gcWhileBusy(BUTTONS.map($).filter(Boolean), async function () {
    try { c = await gcApi("POST", "/campaigns/check", spec); }
    catch (e) { gcShowProblems(e, "campaign-msg"); }  // on their fields, as a create says them
    return true;
  });
  if (!ran || c === null) { return; }
  const reasons = [];
  const reachable = c.recipients - c.opted_out;
  const now = gcStartsNow(spec);
  if (now) { reasons.push("Sending starts now, as soon as you confirm: " + c.sentence); }
  if (c.unrenderable && c.unrenderable < reachable) {
    reasons.push(c.unrenderable + " of " + reachable + " recipient(s) cannot get this message and will be skipped: " + c.unrenderable_words + ".");
  }
  if (!reasons.length) { return go(); }
  $("confirm-text").innerHTML = reasons.map(function (r) { return "<li>" + gcEsc(r) + "</li>"; }).join("");
  $("form-confirm").textContent = now ? "Create and send now" : "Create anyway";
  gcPending = go;
  $("create-confirm").classList.remove("hidden");
  gcShow("campaign-msg", "", false);
  $("form-confirm").focus();
}
function gcHideConfirm() {
  gcPending = null;
  if ($("create-confirm")) { $("create-confirm").classList.add("hidden"); }
}
async function gcConfirmed() {
  const go = gcPending;
  gcHideConfirm();
  if (go) { await go(); }
}

// --- a test send of the file as it stands, before anything is created ----------------------
function gcTestKey() {
  const who = $("signed-in-as");
  return "gatecast.test-to." + (who ? who.textContent : "");
}
async function gcSendTest() {
  const to = val("ct-to").trim();
  if (!to) { gcShow("ct-msg", "Enter your own number first.", true); $("ct-to").focus(); return; }
  const spec = await gcCurrentSpec();
  if (spec === null) { return; }
  try { localStorage.setItem(gcTestKey(), to); } catch (e) { /* private mode: not remembered */ }
  const contact = val("pv-contact") || GC.shown;
  const body = { spec: spec, to: to, contact_id: contact ? Number(contact) : null };
  await gcWhileBusy([$("ct-send")], async function () {
    gcShow("ct-msg", "Sending…", false);
    try {
      const t = await gcApi("POST", "/campaigns/test-send", body);
      const who = t.name ? ", rendered for " + t.name : "";
      if (t.state === "sent") {
        gcShow("ct-msg", "Test sent to " + t.target + " through " + t.sender + who + ". Nothing was created.", false);
      } else {
        gcShow("ct-msg", "The test was not sent to " + t.target + ": " + (t.reason || t.error || t.state) + ".", true);
      }
    } catch (e) { gcShow("ct-msg", gcProblem(e), true); }
  });
}
async function gcSaveEdit() {
  const spec = await gcCurrentSpec();
  if (spec === null) { return; }
  return submit("/campaigns/" + GC.source, spec, false, null, "PUT");
}
async function submitToml(previewOnly) {
  const file = $("toml-file").files[0];
  if (!file) { gcShow("campaign-msg", "Choose a TOML file first.", true); return; }
  const fd = new FormData();
  fd.append("file", file);
  const go = function () { return submit(previewOnly ? "/campaigns/preview/toml" : "/campaigns/toml", fd, previewOnly, "toml-key"); };
  if (previewOnly) { return go(); }
  let parsed;
  try { parsed = await gcApi("POST", "/campaigns/from-toml", { toml: await file.text() }); }
  catch (e) { return go(); }  // the create names what is wrong with the file
  return gcAskFirst(parsed.spec, go);
}

// --- any contact: found by the contacts search, then previewed ---------------------------
let gcSearchTimer = null;
function gcSearch() {
  clearTimeout(gcSearchTimer);
  gcSearchTimer = setTimeout(async function () {
    const q = val("pv-search").trim();
    if (!q) { $("pv-found").innerHTML = ""; return; }
    try {
      const page = await gcApi("GET", "/contacts?limit=8&q=" + encodeURIComponent(q));
      $("pv-found").innerHTML = page.items.length ? page.items.map(function (c) {
        return "<button type='button' role='option' class='link pv-pick' data-id='" + c.id + "'>" + gcEsc((c.name || c.phone) + " · " + c.phone) + "</button>";
      }).join("") : "<span class='muted small'>No contact matches.</span>";
    } catch (e) { gcShow("pv-found", gcProblem(e), true); }
  }, 300);
}
function gcPick(ev) {
  const btn = ev.target.closest(".pv-pick");
  if (!btn) { return; }
  const sel = $("pv-contact");
  if (!Array.from(sel.options).some(function (o) { return o.value === btn.dataset.id; })) {
    const o = document.createElement("option"); o.value = btn.dataset.id; o.textContent = btn.textContent; sel.appendChild(o);
  }
  sel.value = btn.dataset.id;
  $("pv-found").innerHTML = "";
  $("pv-search").value = "";
  gcRefresh();
}

// an uploaded TOML file gets its final check too, before it is created
async function gcCheckUpload() {
  const file = $("toml-file").files[0];
  if (!file) { return; }
  try {
    const parsed = await gcApi("POST", "/campaigns/from-toml", { toml: await file.text() });
    const c = await gcApi("POST", "/campaigns/check", parsed.spec);
    gcShow("final-check", file.name + ": " + c.sentence, false);
  } catch (e) { gcShow("final-check", file.name + ":\n" + gcProblem(e), true); }
}

// --- phones: the preview stands below the long form; a toggle in reach brings it into view
// and takes the user back where they were (its words follow what is in sight) ----------------
let gcFormScroll = null;
let gcPreviewSeen = false;
function gcTogglePreview() {
  if (gcPreviewSeen) {
    window.scrollTo(0, gcFormScroll === null ? $("composer").offsetTop : gcFormScroll);
    gcFormScroll = null;
    return;
  }
  gcFormScroll = window.scrollY;
  $("composer-preview").scrollIntoView({ block: "start" });
  $("composer-preview").focus({ preventScroll: true });
}
function gcWatchPreview() {
  if (!("IntersectionObserver" in window)) { return; }
  new IntersectionObserver(function (entries) {
    gcPreviewSeen = entries[entries.length - 1].isIntersecting;
    const toggle = $("pv-toggle");
    toggle.textContent = gcPreviewSeen ? "Back to the form" : "Preview";
    toggle.setAttribute("aria-pressed", String(gcPreviewSeen));
  }, { threshold: 0.25 }).observe($("phone"));
}

// --- start -----------------------------------------------------------------------------------
(function () {
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  if (GC.spec) { fillForm(GC.spec); } else { gcEnsureOption("f-tz", GC.zone || browserZone); gcKindChanged(); }
  $("f-type").addEventListener("change", gcKindChanged);
  document.querySelectorAll("input[name=to]").forEach(function (r) { r.addEventListener("change", gcToChanged); });
  document.querySelectorAll("input[name=repeat]").forEach(function (r) { r.addEventListener("change", gcRepeatChanged); });
  $("campaign-form").addEventListener("input", function (ev) { if (ev.target.id) { gcTouched.add(ev.target.id); } gcHideConfirm(); gcChanged(); });
  $("campaign-msg").addEventListener("click", gcFocusField);
  $("campaign-form").addEventListener("change", function (ev) { if (ev.target.id) { gcTouched.add(ev.target.id); } gcChanged(); });
  $("pv-contact").addEventListener("change", gcRefresh);
  $("pv-search").addEventListener("input", gcSearch);
  $("pv-found").addEventListener("click", gcPick);
  if ($("toml-file")) { $("toml-file").addEventListener("change", gcCheckUpload); }
  if ($("ct-to")) { try { $("ct-to").value = localStorage.getItem(gcTestKey()) || ""; } catch (e) { /* not remembered */ } }
  gcWatchPreview();
  gcRefresh();
})();
